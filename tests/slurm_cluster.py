"""A one-node Slurm cluster on this host, from Debian's packages (munge, slurmctld, slurmd), for the tests.

    with SlurmCluster.start(tmp_dir) as cluster:    # or cluster = SlurmCluster.start(...); cluster.stop()
        subprocess.run(["sbatch", ...], env=cluster.env)

Everything lives in one folder of its own: the munge key and socket, slurm.conf (ports picked free), state, spool
and logs, so it neither reads nor disturbs a Slurm the host may already run. The daemons run in the foreground as
our children and are stopped by their pids. Accounting is off (no slurmdbd, no database): `sacct` fails here, as on
a cluster without accounting, which is the harder case for perflab (it must name a job's end from `squeue` and
from the job itself, and notice a task that vanished). Needs root (slurmd starts jobs as their user) and the
binaries; `missing()` says what is absent, for a skip reason.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "srun", "sinfo")
PARTITION = "debug"
LOW = "low"  # a partition whose jobs the default one pre-empts


def missing() -> str:
    """Why this host cannot run the cluster ('' when it can)."""
    absent = [b for b in DAEMONS + CLIENTS if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if absent:
        return (f"Slurm is not installed ({', '.join(absent)} not found): "
                "apt-get install slurm-wlm munge (as .ci/run does)")
    if os.geteuid() != 0:
        return "the test Slurm cluster needs root (slurmd starts jobs as their user): run as root, as CI does"
    return ""


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(d: Path, host: str, cpus: int, memory_mb: int) -> str:
    ctld_port, slurmd_port = _free_port(), _free_port()
    return f"""\
ClusterName=perflabtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# memory is sampled every second and a step over its --mem is killed: Slurm says OUT_OF_MEMORY (no cgroups here)
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# memory is a resource (a pre-empting job can need the memory of the jobs it pre-empts); jobs asking for none get
# this much per CPU, enough for a kernel
DefMemPerCPU=4096
ReturnToService=2
# a cancelled or timed-out job's processes get SIGTERM, then SIGKILL this many seconds later
KillWait=5
# the test machine may have fewer cores than the node claims: jobs that sleep need no core of their own
SlurmdParameters=config_overrides
# a job in {PARTITION} pre-empts (cancels) jobs in {LOW} when it needs their CPUs
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP PriorityTier=2
PartitionName={LOW} Nodes={host} MaxTime=INFINITE State=UP PriorityTier=1
"""


class SlurmCluster:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    @classmethod
    def start(cls, root: Path, cpus: int = 8, timeout_s: float = 60) -> SlurmCluster:
        cluster = cls(root)
        try:
            cluster._start(cpus, timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start(self, cpus: int, timeout_s: float) -> None:
        d = self.root
        for sub in ("munge", "state", "spool", "log"):
            (d / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(_slurm_conf(d, host, cpus, memory_mb=65536))
        self._spawn("munged", [_binary("munged"), "--foreground", "--force", f"--socket={d}/munge/munge.socket",
                               f"--key-file={key}", f"--pid-file={d}/munge/munged.pid",
                               f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge/munged.seed"])
        self._wait(lambda: (d / "munge" / "munge.socket").exists(), "munged's socket", timeout_s)
        self._spawn("slurmctld", [_binary("slurmctld"), "-D", "-f", str(self.conf)])
        self._wait(lambda: self._ok(["scontrol", "ping"]) and "UP" in self._out(["scontrol", "ping"]),
                   "slurmctld to answer `scontrol ping`", timeout_s)
        self._spawn("slurmd", [_binary("slurmd"), "-D", "-f", str(self.conf)])
        self._wait(lambda: self._out(["sinfo", "-h", "-o", "%t"]).strip() in ("idle", "mix", "alloc"),
                   "the node to be idle in `sinfo`", timeout_s)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 (closed with the process)
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)
        log.close()

    def _ok(self, argv: list[str]) -> bool:
        return subprocess.run(argv, env=self.env, capture_output=True).returncode == 0

    def _out(self, argv: list[str]) -> str:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True).stdout

    def _wait(self, ready, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}:\n{self.logs()}")

    def logs(self, lines: int = 30) -> str:
        out = []
        for f in sorted((self.root / "log").glob("*")):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {f.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def cancel_all(self, timeout_s: float = 30) -> None:
        """Cancel every job of this cluster and wait until none runs (a job's processes outlive slurmd)."""
        if "slurmctld" not in self.procs or self.procs["slurmctld"].poll() is not None:
            return
        subprocess.run(["scancel", f"--user={os.geteuid()}"], env=self.env, capture_output=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._out(["squeue", "-h", "-t", "RUNNING,COMPLETING,SUSPENDED"]):
            time.sleep(0.5)

    def stop(self) -> None:
        """Cancel the jobs left, then stop the daemons by their pids: slurmd, slurmctld, munged."""
        self.cancel_all()
        for name in reversed(DAEMONS):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
