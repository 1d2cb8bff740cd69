"""Issue 33, part 2: the table of what was tried to make proofs earn their place, on the whole splits of the
real graphs. Per graph: the policy and ComplEx trained as notebooks/03b_links trains them (CPU defaults), the
valid and test lists scored ONCE (beam search + embedding + the mined rules' table: the minutes), then every
fitting procedure of `links.combine.PROCEDURES` fitted on 24 / 300 / all valid triples (seconds each) and ranked
on the whole test split beside ComplEx alone (`links.predict.fits_table`), the oracle rows (fitted on test)
labelled, and the decoy check (`links.checks.decoy_check`) of LinkConfig's default fit.

    nice -n 5 .venv/bin/python tools/link-fits.py nations umls kinship [--out outputs/local/link-fits]

What it measured (commit fc5456b, torch 2.13 CPU, threads=1, nice 5 on the shared 2-core VM with other work running:
load average 1.2-2.8; realistic MRR on the whole test splits; default = LinkConfig's fit, "per rule" on all of valid):

    graph    ComplEx alone  global, 24 valid (before)  global, all valid  global + rules, all  per rule, all (default)
    nations  0.7795         0.8442 (+0.065)            0.8461 (+0.067)    0.8657 (+0.086)      0.8667 (+0.087)
    umls     0.9509         0.9534 (+0.003)            0.9595 (+0.009)    0.9663 (+0.015)      0.9773 (+0.026)
    kinship  0.8739         0.8722 (-0.002)            0.8752 (+0.001)    0.8762 (+0.002)      0.8762 (+0.002)

Kinship's oracle rows (fitted on test) reach +0.003 (global) and +0.006 (per rule): no valid-fitted linear combination
of these features earns +0.01 there. Decoys (100 random false triples, both sides) ranked at chance on all three:
mean share of the way down 0.505 / 0.466 / 0.465 (chance 0.5 +- 0.082). Scoring valid + test once: 8 s / 176 s /
276 s; all fits of the table 5 s / 35 s / 48 s.

prints one table per graph and writes <out>/<graph>.json (the rows, the decoy check, the run's settings) and
<out>/<graph>.pt (the scored valid and test lists: `predict.Scored`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import time
from pathlib import Path

import torch

from perflab.prover.core.data import training_queries
from perflab.prover.core.datasets import knowledge_graph
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy, train_policy
from perflab.prover.links import checks, combine
from perflab.prover.links.embeddings import EmbeddingConfig, train_complex
from perflab.prover.links.params import LinkConfig
from perflab.prover.links.predict import fit_combination, fits_table, score_split, valid_queries
from perflab.prover.links.search import BeamSearch


def run_graph(name: str, cfg: LinkConfig, train_updates: int = 30, max_derived: int = 16, decoys: int = 100,
              save: Path | None = None) -> dict:
    t0 = time.perf_counter()
    kg, bench = knowledge_graph(name, 6, cfg.seed, max_derived)
    engine = UnificationEngine(kg, max_derived=max_derived)
    policy = make_policy(kg, seed=cfg.seed)
    train_policy(policy, engine, training_queries(kg), updates=train_updates, batch=64, max_depth=10, seed=cfg.seed)
    model, _ = train_complex(kg, cfg.emb, cfg.seed, engine.device)
    search = BeamSearch(engine, policy, cfg.beam, cfg.search_depth, cfg.compile, cfg.backend)
    table = combine.RuleTable(kg, bench.mining.rules)
    t1 = time.perf_counter()
    valid = score_split(kg, valid_queries(kg, 0), search, model, cfg.search_batch, cfg.seed, table)
    test = score_split(kg, kg.queries["test"], search, model, cfg.search_batch, cfg.seed, table)
    t2 = time.perf_counter()
    if save is not None:                          # the lists, for fits tried later without the search's minutes
        torch.save({"valid": valid, "test": test, "n_rules": table.n_rules}, save)
    rows = fits_table(valid, test, table.n_rules, cfg.seed, default=(cfg.fit, cfg.n_fit))
    t3 = time.perf_counter()
    comb = fit_combination(valid.head(cfg.n_fit), cfg, table)
    decoy, info = checks.decoy_check(kg, search, model, comb, table, decoys, cfg.search_batch, cfg.seed)
    return {"graph": name, "rows": rows, "decoy": {"passed": decoy[0].passed, "detail": decoy[0].detail, **info},
            "valid triples": valid.queries, "test triples": test.queries, "rules": table.n_rules,
            "candidates": valid.candidates + test.candidates,
            "seconds": {"setup": t1 - t0, "scoring (valid + test)": t2 - t1, "fits": t3 - t2,
                        "decoys": time.perf_counter() - t3}}


def show(res: dict) -> str:
    lines = [f"== {res['graph']}: {res['valid triples']} valid, {res['test triples']} test triples, {res['rules']} mined "
             f"rules, {res['candidates']:,} candidates scored once; seconds "
             + ", ".join(f"{k} {v:.0f}" for k, v in res["seconds"].items()),
             f"{'procedure':<15} {'fitted on':<14} {'feats':>5} {'l2':>7} {'valid½ MRR':>10} {'ComplEx':>8} "
             f"{'combined':>8} {'gain':>7}"]
    for r in res["rows"]:
        lines.append(f"{r['procedure']:<15} {r['fitted on']:<14} {r['features']:>5} {r['l2 (per rule)']:>7.0e} "
                     f"{r['valid halves MRR']:>10.4f} {r['MRR ComplEx alone']:>8.4f} {r['MRR combined']:>8.4f} "
                     f"{r['gain']:>+7.4f}{'  <- default' if r['default'] else ''}")
    lines.append(f"decoy check ({'pass' if res['decoy']['passed'] else 'FAIL'}): {res['decoy']['detail']}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="*", default=["nations", "umls", "kinship"])
    ap.add_argument("--out", default="outputs/local/link-fits")
    ap.add_argument("--batch", type=int, default=512, help="rows per search step (the research note's)")
    ap.add_argument("--decoys", type=int, default=100)
    a = ap.parse_args()
    torch.set_num_threads(1)                      # the notebook's threads=1
    cfg = LinkConfig(n_queries=0, search_batch=a.batch, compile="default", backend="eager",
                     emb=EmbeddingConfig(rank=100, epochs=50), greedy_batch=0)   # the greedy loop at the search's batch
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for g in a.graphs:
        res = run_graph(g, cfg, decoys=a.decoys, save=out / f"{g}.pt")
        res.update(commit=commit, torch=torch.__version__, threads=1, config=dataclasses.asdict(cfg))
        print(show(res), flush=True)
        (out / f"{g}.json").write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
