"""The measurements behind notebooks/03_eval, as functions (the notebook only calls and plots them)."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from ..bench import measure, summary
from ..compiles import count_compiles, reset
from ..memory import peak_memory
from . import baseline, optimized
from .data import random_kg, random_states
from .engine import UnificationEngine
from .reference import Limits, ReferenceProver, prove_exhaustive, to_tuples
from .rollout import rollout_full
from .step import GreedyStep

# ---- correctness ------------------------------------------------------------------------------

def engine_vs_reference(kg, engine, n_states: int = 400, n_random_kgs: int = 10, seed: int = 0) -> dict:
    """Successor lists of the engine and the reference on random states of `kg` and of small random KGs
    (tight limits, so window cuts, list cuts and over-long rejections happen). Counts of states compared,
    mismatches, and states whose lists were cut."""
    states, nv = random_states(kg, n_states, engine.A, seed)
    cases = [(kg, engine, (states.to(engine.device), nv.to(engine.device)))]
    for i in range(n_random_kgs):
        rkg = random_kg(seed + i)
        reng = UnificationEngine(rkg, max_atoms=4, max_derived=6, max_fact_matches=2 + i % 3, end_action=i % 2 == 0)
        cases.append((rkg, reng, random_states(rkg, 48, 4, seed + i)))
    out = {"states": 0, "mismatches": 0, "truncated": 0}
    for g, e, (states, nv) in cases:
        ref = ReferenceProver(g, Limits.of(e))
        d = e.derive(states, nv)
        for i, s in enumerate(to_tuples(states)):
            c = int(d.counts[i])
            got = list(zip(to_tuples(d.states[i, :c]), d.next_var[i, :c].tolist()))
            out["mismatches"] += got != ref.successors(s, int(nv[i]))
        out["states"] += len(states)
        out["truncated"] += int(d.truncated.sum())
    return out


def bfs_vs_reference(kg, engine, queries: torch.Tensor, max_depth: int) -> dict:
    """Shortest-proof depth of each query by the batched BFS and by the reference search."""
    got = prove_exhaustive(engine, queries, max_depth)
    ref = ReferenceProver(kg, Limits.of(engine))
    want = torch.tensor([ref.prove(tuple(q), max_depth) for q in queries.tolist()])
    return {"queries": len(queries), "agree": bool(torch.equal(got, want)), "provable": int((got > 0).sum()),
            "depth": got}


# ---- recompiles -------------------------------------------------------------------------------

def recompiles_by_tail(engine, policy, candidates: torch.Tensor, batch_sizes, tail_sizes, mode: str,
                       max_depth: int = 3) -> list[dict]:
    """For padded and unpadded chunking: warm up at each batch size, then evaluate len = batch + tail
    candidates for each tail size and count the graphs compiled after the warm-up (and their seconds)."""
    rows = []
    for padded in (True, False):
        fn = optimized.score_candidates if padded else baseline.score_candidates
        for b in batch_sizes:
            reset()  # a fresh cache per case: shapes seen in another case would hide recompiles
            step = GreedyStep(engine, policy, max_depth, compile=mode)
            with torch.inference_mode(), count_compiles() as warm:
                t0 = time.perf_counter()
                fn(step, candidates[:b], b)
                warm_s = time.perf_counter() - t0
            for tail in tail_sizes:
                n = b + tail
                with torch.inference_mode(), count_compiles() as cc:
                    t0 = time.perf_counter()
                    fn(step, candidates[:n], b)
                    sec = time.perf_counter() - t0
                rows.append(dict(padding=padded, batch=b, tail=tail, warmup_graphs=warm.graphs,
                                 graphs=cc.graphs, recompiles=cc.recompiles,
                                 cudagraph_recordings=cc.cudagraph_recordings, seconds=sec, warmup_seconds=warm_s))
    reset()
    return rows


# ---- batch size -------------------------------------------------------------------------------

@dataclasses.dataclass
class SweepPoint:
    batch: int
    measurement: object        # perflab.bench Measurement of one chunk's rollout (warm)
    steps: int                 # steps the chunk ran (its slowest candidate)
    first_call_s: float        # the first rollout at this size (compiles included when compiled)
    peak_bytes: int            # peak memory over entry during one rollout
    peak_method: str

    @property
    def ms_per_candidate(self) -> float:
        return 1e3 * self.measurement.median / self.batch

    @property
    def us_per_candidate_step(self) -> float:
        return 1e6 * self.measurement.median / (self.batch * self.steps)


def batch_sweep(step: GreedyStep, candidates: torch.Tensor, batch_sizes, *, min_run_time: float,
                max_run_time: float) -> list[SweepPoint]:
    """One chunk of B candidates (the evaluation's candidates, repeated to fill B) per batch size:
    first-call time, warm time (perflab.bench.measure), steps run and peak memory."""
    out = []
    for b in batch_sizes:
        chunk = candidates.repeat((b + len(candidates) - 1) // len(candidates), 1)[:b]
        with torch.inference_mode():
            t0 = time.perf_counter()
            res = rollout_full(step, chunk)
            first = time.perf_counter() - t0
            with peak_memory(step.engine.device) as mem:
                rollout_full(step, chunk)
            m = measure(lambda chunk=chunk: rollout_full(step, chunk), label="rollout of one chunk", sub_label=f"B={b}",
                        description=step.mode, min_run_time=min_run_time, max_run_time=max_run_time,
                        warmup=0, device=step.engine.device)
        out.append(SweepPoint(b, m, res.steps_executed, first, mem.delta_bytes, mem.method))
    return out


def cache_bytes(device: torch.device) -> dict:
    """L2 (and, on CPU, last-level) cache sizes in bytes: the GPU's properties or Linux sysfs."""
    if device.type == "cuda":
        return {"L2": int(torch.cuda.get_device_properties(device).L2_cache_size)}
    sizes = {}
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind = (d / "level").read_text().strip(), (d / "type").read_text().strip()
            text = (d / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
        sizes[f"L{level}"] = int(text.rstrip("KMG")) * mult
    return sizes


def step_bytes(engine, policy, batch: int, max_derived: int | None = None) -> int:
    """Bytes the step's largest intermediates occupy at `batch` rows (the prediction, before measuring):
    derive's candidate atoms [B, N, M, 3] int64 (about 6 live versions: bodies, rest, two substitutions,
    keys, compaction), its output [B, S, A, 3] int64 (x2: scatter and gather), and the policy's bag
    indices [B, S, 3A] int64 + weights float32 and successor embeddings [B, S, E] float32.
    `max_derived` replaces the engine's S (to predict another configuration)."""
    N, M, S, A = engine.K + engine.R, engine.A + 1, max_derived or engine.S, engine.A
    E = policy.cfg.embed_dim
    return batch * (6 * N * M * 3 * 8 + 2 * S * A * 3 * 8 + S * 3 * A * (8 + 4) + S * E * 4)


def timed_eval(fn, repeats_s: tuple[float, float], label: str, sub_label: str, description: str, device):
    """First call (cold: compiles included) and a warm Measurement of `fn`."""
    t0 = time.perf_counter()
    fn()
    cold = time.perf_counter() - t0
    m = measure(fn, label=label, sub_label=sub_label, description=description, min_run_time=repeats_s[0],
                max_run_time=repeats_s[1], warmup=0, device=device)
    return cold, m, summary(m)
