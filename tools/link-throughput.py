"""Link prediction's throughput, side by side in one process: today's beam search (`search.BeamSearch`), the search
whose last step tests membership (`search.ClosingSearch`), and the floor (ComplEx 1-N + the mined rules' table),
on both sides' filtered candidates of a graph's test split or a slice of it (issue 33).

    nice -n 5 .venv/bin/python tools/link-throughput.py nations                 # the whole test split
    nice -n 5 .venv/bin/python tools/link-throughput.py kinship --queries 40 --repeats 5

Set up as notebooks/03b_links's CPU defaults (threads 1, compile "default" with backend "eager", max_derived 16,
beam 16, depth 2, 30 policy-gradient updates); batch 512 rows per search step unless --batch. The embedding is
trained for --emb-epochs (default 0: its scoring costs the same whatever its weights). Prints the environment,
the machine's load average, then one line per version: candidates/s, median and p20-p80 over --repeats rounds.
"""
import argparse
import os

import torch

from perflab.kit.notebook import environment_line
from perflab.prover.core.data import training_queries
from perflab.prover.core.datasets import knowledge_graph, test_queries
from perflab.prover.core.engine import UnificationEngine
from perflab.prover.core.policy import make_policy, train_policy
from perflab.prover.links.embeddings import EmbeddingConfig, train_complex
from perflab.prover.links.params import LinkConfig
from perflab.prover.links.study import SEARCHES, throughput


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kg", help="kinship, nations, umls, family or a folder")
    ap.add_argument("--queries", type=int, default=0, help="test triples (the first n); 0: the whole split")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds after one untimed pass per version")
    ap.add_argument("--batch", type=int, nargs="+", default=[512], help="rows per search step (several: a sweep)")
    ap.add_argument("--compile", default="default")
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--emb-epochs", type=int, default=0)
    ap.add_argument("--versions", nargs="+", default=list(SEARCHES), help=f"of {list(SEARCHES)}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    kg, bench = knowledge_graph(args.kg, 6, args.seed, 16, device)
    engine = UnificationEngine(kg, max_derived=16, device=device)
    policy = make_policy(kg, seed=args.seed, device=device)
    train_policy(policy, engine, training_queries(kg), updates=30, batch=64, max_depth=10, seed=args.seed)
    model, _ = train_complex(kg, EmbeddingConfig(epochs=args.emb_epochs), args.seed, device)
    queries = test_queries(kg, args.queries)
    print(environment_line(device))
    print(f"{args.kg}: {kg.summary()}; engine A={engine.A} S={engine.S} K={engine.K} R={engine.R}; "
          f"{len(queries)} of {len(kg.queries['test'])} test triples; compile={args.compile} backend={args.backend}")
    print(f"load average before: {os.getloadavg()}")
    for batch in args.batch:
        cfg = LinkConfig(n_queries=args.queries, search_batch=batch, compile=args.compile, backend=args.backend, seed=args.seed,
                         greedy_batch=batch)
        rows = throughput(kg, engine, policy, model, queries, cfg, bench.mining.rules if bench else None, args.repeats,
                          {k: SEARCHES[k] for k in args.versions})
        base = rows[0]["cand/s"]
        for r in rows:
            extra = f", table build {r['table build s'] * 1e3:.0f} ms" if "table build s" in r else ""
            print(f"batch {batch:5d}  {r['version']:46s} {r['cand/s']:12,.0f} cand/s (p20-p80 {r['p20']:,.0f}-"
                  f"{r['p80']:,.0f}, {r['repeats']} rounds)  x{r['cand/s'] / base:7.2f}  {r['candidates']:,} candidates, "
                  f"{r['proved']:,} proved ({r['differ from first']} differ from the first), first pass "
                  f"{r['first pass s']:.2f} s{extra}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
