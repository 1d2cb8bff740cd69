"""torchrun + DistributedDataParallel on CPU (gloo): 2 ranks, a tiny model, a few steps; --impl names a key of IMPLS."""
import os
import signal
import subprocess
import sys

import pytest
import torch

from perflab.latentwire import ModelConfig, build_model

MODEL = dict(d_enc=16, enc_layers=1, d_lm=32, lm_layers=1, latent_len=4, adapter_hidden=32)


@pytest.mark.slow
def test_two_process_gloo_ddp_ends_with_identical_parameters(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "perflab.latentwire.ddp", "--device", "cpu", "--steps", "2", "--n-examples", "16",
           "--batch-size", "2", "--accum-steps", "2", "--lr", "0.01", "--out", str(tmp_path),
           "--toggle", "dataloader=True", "--toggle", "grad_accum=True", "--toggle", "single_pass=True",
           "--toggle", "pretokenize=True", *(f"--model={k}={v}" for k, v in MODEL.items())]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # its own session: on a timeout the ranks go with torchrun (subprocess.run's timeout kills torchrun alone, and a
    # rank waiting on its peer's rendezvous outlives the test)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"torchrun did not end in 180 s: {out[-2000:]}{err[-3000:]}")
    r = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "ddp: 2 rank(s) on cpu, 2 steps" in r.stdout
    ranks = [torch.load(tmp_path / f"rank{i}.pt") for i in (0, 1)]
    assert all(x["world"] == 2 for x in ranks)
    p0, p1 = ranks[0]["params"], ranks[1]["params"]
    assert p0.keys() == p1.keys() and all(torch.equal(p0[k], p1[k]) for k in p0)  # gradients were all-reduced
    init = {n: p for n, p in build_model(ModelConfig(**MODEL), seed=0).named_parameters() if p.requires_grad}
    assert any(not torch.equal(init[k], p0[k]) for k in p0)  # and they trained
    i0, i1 = ranks[0]["indices"], ranks[1]["indices"]
    assert len(i0) == len(i1) == 8 and not set(i0) & set(i1)  # DistributedSampler: disjoint shards
    assert ranks[0]["losses"] != ranks[1]["losses"]  # each rank's loss is on its own shard


def test_an_unknown_version_is_refused_with_the_names_there_are(capsys):
    from perflab.latentwire.ddp import parse_args

    assert parse_args(["--impl", "baseline"]).impl == "baseline"
    with pytest.raises(SystemExit):
        parse_args(["--impl", "fast"])
    err = capsys.readouterr().err
    assert "invalid choice: 'fast'" in err and "baseline" in err and "optimized" in err  # study.IMPLS' keys
