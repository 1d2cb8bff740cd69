"""What notebooks/03b_links calls, in its order (issue 23: rank real graphs as the papers do; each takes the run:
`run.cfg`, `run.device`, `run.log`; those that measure log what they measured and show it):

    found = study.Findings(work=study.workload(run))        the graph, its engine, the trained policy, the test triples
    checks.oracle_check(...), checks.search_checks(...)     the oracle against the reference, the search against it
    found.lp = study.rank_split(run, found.work)            predict.evaluate_link_prediction: the split ranked
    checks.link_ranks_across_batches(...), checks.decoy_check(...)    ranks that hold
    study.comparison(found)                                 the table beside the published rows
    found.fits = study.fits(run, found)                     what fitting on valid was tried (issue 33)
    found.throughput = study.search_throughput(run, found)  today's search, the new one, the floor, side by side
    found.speed = study.decide_speed(run, found)            the throughput targets, decided once (`decide_rate`)
    study.throughput_figure(run, found)                     candidates/s: the decided rate beside the versions
    study.mrr_figure(run, found)                            the card's figure: MRR beside the published rows
    study.evidence(run, found)                              each claim's Evidence (`claims.CLAIMS`), for card.judge

IMPLS names the versions, baseline first: how a candidate gets its proof score, by the greedy policy's one proof
(the seed's way) or by the beam search. Both are built (engine, policy, LinkConfig) and called `.score(candidates)`;
`predict.cost_per_candidate` times them on the same candidates. SEARCHES names the beam search's own versions,
today's first (issue 33; both kit `Versions`): built (engine, policy, width, depth, compile, backend), called
`.score(candidates, batch)`; `throughput` times them side by side with the floor (`rule_table.py`).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time

import torch

from ...kit.bench import show
from ...kit.claims import Evidence
from ...kit.env import synchronize
from ...kit.figures import colors
from ...kit.formatting import value_text
from ...kit.intervals import t_quantile
from ...kit.verdicts import CONFIDENCE, Decision, Measured, decide_rate
from ...kit.versions import Versions
from ..core.datasets import graph_label, test_queries
from ..core.prepared import OnPrepared, prepare
from . import baseline, optimized, predict, protocols, rule_table
from .benchmark_eval import published, published_mrr
from .claims import CLAIMS
from .params import LinkConfig
from .search import BeamSearch, ClosingSearch, SparseClosingSearch

IMPLS = Versions({"baseline": baseline.Prover, "optimized": optimized.Prover})   # baseline first
SEARCHES = Versions({"expand every step": BeamSearch, "last step closes": ClosingSearch,     # today's first
                     "last step closes, policy where a proof closes": SparseClosingSearch}, what="search")
FLOOR = "floor: ComplEx 1-N + rule table"
# looked up at import: a misspelt key fails first
KG_SPEED = (CLAIMS["kg_speed"], CLAIMS["kg_speed_gpu"], CLAIMS["kg_speed_5k"])
THROUGHPUT_QUERIES, THROUGHPUT_ROUNDS = 8, 3   # the side-by-side table: the candidates of 8 test triples, 3 rounds


def compile_mode(cls, device: torch.device, mode: str) -> str:
    """The compile mode a search version is timed in: the run's, except for a version that reads the host every chunk
    (`HOST_READS`: the CPU's) on a device, which runs eager there: under CUDA graphs it would time a setup nobody
    runs, with its own cold compiles."""
    return "off" if getattr(cls, "HOST_READS", False) and torch.device(device).type != "cpu" else mode


def throughput(kg, engine, policy, model, queries: torch.Tensor, cfg: LinkConfig, rules=None, repeats: int = 5,
               searches: dict = SEARCHES) -> list[dict]:
    """Candidates per second of each search version, and of the floor where `rules` (mined) are given, on both
    sides' filtered candidates of `queries`, side by side in one process. A pass is what the evaluation times
    (`predict.score_split`: the search and the embedding's scoring, candidates built beforehand); each version's
    first pass is untimed (it compiles: `first pass s`), then `repeats` rounds run every version once in turn.
    -> one row per version: candidates, cand/s (median over rounds, p20, p80), the candidates it proves, and
    how many differ from the first version's proofs (the floor: from the first version's, its table's "proved").
    Cost: 1 + repeats passes of every version; today's search runs ~2,000 candidates/s on this CPU (Kinship's whole
    split: ~100 s a pass), so a notebook times a slice of the larger splits (tools/link-throughput.py: --queries)."""
    sides = rule_table.side_candidates(kg, queries, cfg.seed)
    dev = engine.device
    flats = {side: flat.to(dev) for side, (_, flat) in sides.items()}
    n = sum(len(f) for f in flats.values())

    def search_pass(search):
        proven = []
        for side, (cs, _) in sides.items():
            proven.append(search.score(flats[side], cfg.search_batch).proven.cpu())
            model.candidate_log_probs(queries, side, cs.cands)
        return torch.cat(proven)

    modes = {name: compile_mode(cls, dev, cfg.compile) for name, cls in searches.items()}
    built = {name: cls(engine, policy, cfg.beam, cfg.search_depth, modes[name], cfg.backend)
             for name, cls in searches.items()}
    fns = {name: functools.partial(search_pass, s) for name, s in built.items()}
    extra = {}
    if rules is not None:
        t0 = time.perf_counter()
        table = rule_table.rule_table(kg, rules)
        extra["table build s"] = time.perf_counter() - t0
        fns[FLOOR] = lambda: rule_table.floor_pass(model, table, queries, sides)
    first, proved = {}, {}
    with torch.inference_mode():
        for name, fn in fns.items():
            t0 = time.perf_counter()
            proved[name] = fn()
            synchronize(dev)
            first[name] = time.perf_counter() - t0
        secs = {name: [] for name in fns}
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                synchronize(dev)
                secs[name].append(time.perf_counter() - t0)
    ref = proved[next(iter(searches))]
    if rules is not None:
        proved[FLOOR] = rule_table.proved_by_table(table, torch.cat(list(flats.values())))[0].cpu()
    rows = []
    for name, s in secs.items():
        rate = n / torch.tensor(s, dtype=torch.float64)
        p20, p50, p80 = torch.quantile(rate, torch.tensor([0.2, 0.5, 0.8], dtype=torch.float64)).tolist()
        rows.append({"version": name, "candidates": n, "cand/s": p50, "p20": p20, "p80": p80, "repeats": repeats,
                     "first pass s": first[name], "proved": int(proved[name].sum()),
                     "differ from first": int((proved[name] != ref).sum()), "batch": cfg.search_batch,
                     **(extra if name == FLOOR else {})})
    return rows


# ---- what every measurement runs on ---------------------------------------------------------------------------

@dataclasses.dataclass
class Workload(OnPrepared):    # prepared: the graph, its engine, the trained policy; a benchmark's mined rules
    queries: torch.Tensor      # [Q, 3] the test triples ranked (n_queries=0: the whole split)


def workload(run) -> Workload:
    """The run's graph, its engine and the trained policy (`core.prepared`), and the test triples it ranks; printed."""
    p = prepare(run)
    queries = test_queries(p.kg, run.cfg.n_queries)
    print("\n".join(p.lines()))
    print(f"{len(queries)} of {len(p.kg.queries['test'])} test triples ranked against every filtered corruption")
    return Workload(p, queries)


@dataclasses.dataclass
class Findings:
    """What the notebook measures, one field per measuring function, filled in as it runs: `evidence` reads only
    this, so a claim is judged on the very numbers the cells above it showed."""
    work: Workload | None = None                  # workload
    lp: predict.LinkPrediction | None = None      # rank_split: the split ranked, its coverage and cost
    fits: list | None = None                      # fits: the table of fitting procedures
    throughput: list | None = None                # search_throughput: the search's versions and the floor
    speed: Decision | None = None                 # decide_speed (None: no speed target is this run's setup)


# ---- the split ranked -----------------------------------------------------------------------------------------

def rank_split(run, work: Workload) -> predict.LinkPrediction:
    """`predict.evaluate_link_prediction` of the run's split (`LinkConfig.of` the run's parameters: each batch its
    own), logged (a row names the batch that ran), its sentences printed (`protocols.summary_lines`)."""
    cfg = run.cfg
    lp = predict.evaluate_link_prediction(work.kg, work.engine, work.policy, LinkConfig.of(cfg),
                                          rules=work.prepared.rules)
    graph = graph_label(cfg.kg)
    print("\n".join(protocols.summary_lines(lp, graph, run.device.type)))
    for scorer, r in lp.results.items():
        for rule, m in r.metrics.items():
            run.log.value(f"MRR, {scorer}", m["MRR"], ties=rule, graph=graph, n_queries=lp.queries)
    run.log.value("tie share (fitted)", lp.results["fitted"].tie_share, unit="", graph=graph)
    run.log.value("candidates per second (search + embedding)", lp.candidates_per_s, unit="1/s",
                  search_batch=lp.config.search_batch, candidates=lp.candidates, whole_split=lp.whole_split)
    for k, v in lp.coverage.items():
        run.log.value(k, v, unit="", graph=graph)
    return lp


def comparison(found: Findings):
    """This run's ranks under each tie rule beside the published rows (`protocols.comparison`), as a DataFrame."""
    import pandas as pd

    lp, work = found.lp, found.work
    return pd.DataFrame(protocols.comparison(lp, work.dataset or "")).set_index("model")


def fits(run, found: Findings) -> list[dict]:
    """The table of fitting procedures on this run's valid lists (`predict.fits_table_of`), shown."""
    import pandas as pd

    rows = predict.fits_table_of(found.lp)
    if rows:
        frame = pd.DataFrame(rows).round(3).set_index("procedure")
        for col in ("l2 (per rule)", "valid halves MRR"):   # none for a procedure without one: '-', not NaN
            frame[col] = frame[col].map(lambda v: "-" if pd.isna(v) else f"{v:g}")
        show(frame)
    else:
        print("no valid split on this graph: nothing to fit on")
    return rows


def search_throughput(run, found: Findings) -> list[dict]:
    """`throughput` on the candidates of the first THROUGHPUT_QUERIES test triples, THROUGHPUT_ROUNDS rounds: each
    version's candidates/s (median, p20-p80: indicative, the targets are decided on the whole split by
    `decide_speed`); logged, shown."""
    import pandas as pd

    w, lp = found.work, found.lp
    rows = throughput(w.kg, w.engine, w.policy, lp.model, w.queries[:THROUGHPUT_QUERIES], lp.config,
                      rules=w.prepared.rules, repeats=THROUGHPUT_ROUNDS)
    for r in rows:
        run.log.value("candidates per second", r["cand/s"], unit="1/s", low=r["p20"], high=r["p80"],
                      version=r["version"], graph=graph_label(run.cfg.kg), candidates=r["candidates"],
                      search_batch=r["batch"])
    cols = ["candidates", "cand/s", "p20", "p80", "first pass s", "proved", "differ from first"]
    print(f"indicative: the median of {THROUGHPUT_ROUNDS} rounds on the candidates of {THROUGHPUT_QUERIES} test "
          "triples (p20-p80); the card's cand/s is decided on the whole split (decide_speed)")
    frame = pd.DataFrame(rows).set_index("version")[cols].round({"first pass s": 2})
    rates = ["cand/s", "p20", "p80"]
    frame[rates] = frame[rates].map(lambda x: f"{x:,.0f}")   # a rate in whole candidates per second
    show(frame)
    return rows


def decide_speed(run, found: Findings) -> Decision | None:
    """The throughput, decided once where a speed target is this run's setup (a whole split on its device):
    `decide_rate` over warm batch-sized groups of the test scoring (`predict.scoring_sampler`; lp's passes warmed the
    search up), at most `verdict_time` seconds, against the highest threshold among the targets of this setup; the
    others are judged on the same interval (`evidence`). None, with no time spent, elsewhere."""
    cfg = run.cfg
    here = [c for c in KG_SPEED if not c.off_setup(cfg, run.device.type)]
    if not here:
        return None
    c = max(here, key=lambda c: c.at_least)
    return decide_rate(predict.scoring_sampler(found.work.kg, found.lp), **c.rule, quantity="candidates/s",
                       max_run_time=cfg.verdict_time, warmup=0)


# ---- the figure -----------------------------------------------------------------------------------------------

SCORERS = {"fitted": "search + ComplEx, fitted", "embedding alone": "ComplEx alone", "prover alone": "prover alone",
           "NTPλ max": "NTPλ's rule (max)"}


def mrr_interval(ranks: torch.Tensor, confidence: float = CONFIDENCE, minus: torch.Tensor | None = None,
                 value: float | None = None) -> Measured:
    """The MRR of `ranks` with the t interval of the mean reciprocal rank over them (how far another test split of
    the graph could move it); `minus`: the ranks of another scorer on the same positives, in the same order: the
    paired interval of the difference of the two MRRs (the mean of the per-positive differences of reciprocal ranks).
    `value`: the centre as the split's metrics give it (the same mean; the interval's half-width from the ranks)."""
    rr = (1.0 / ranks.double())
    if minus is not None:
        if minus.shape != ranks.shape:
            raise ValueError(f"mrr_interval: {len(ranks)} ranks against {len(minus)} to subtract (the same positives)")
        rr = rr - 1.0 / minus.double()
    rr = rr.tolist()
    m = sum(rr) / len(rr) if value is None else value
    if len(rr) < 2:
        return Measured(m, -math.inf, math.inf)
    mean = sum(rr) / len(rr)
    sd = (sum((x - mean) ** 2 for x in rr) / (len(rr) - 1)) ** 0.5
    half = t_quantile(1 - (1 - confidence) / 2, len(rr) - 1) * sd / len(rr) ** 0.5
    return Measured(m, m - half, m + half)


def mrr_figure(run, found: Findings):
    """The card's figure: realistic MRR of each scorer on this split with the 99% interval of its mean over the test
    ranks (the interval the MRR claims are judged on), beside the published rows (their tie rule: optimistic; NTPλ's
    the kg_mrr target). -> matplotlib Figure"""
    import matplotlib.pyplot as plt

    lp, work, cfg = found.lp, found.work, run.cfg
    fig, ax1 = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    bars = [(SCORERS[k], mrr_interval(lp.results[k].ranks["realistic"])) for k in SCORERS]
    if lp.rules_only is not None:
        bars.append(("mined rules alone", mrr_interval(lp.rules_only["ranks"])))
    col = colors([n for n, _ in bars], [SCORERS["embedding alone"], SCORERS["fitted"]])
    pub = published(work.dataset or "")
    ys = list(range(len(bars) + len(pub)))[::-1]
    for y, (name, m) in zip(ys, bars):
        ax1.barh(y, m.value, color=col[name], alpha=0.85)
        if m.high > m.low:
            ax1.errorbar(m.value, y, xerr=[[m.value - m.low], [m.high - m.value]], color="black", capsize=3, lw=1)
        ax1.annotate(f"{m.value:.3f}", (min(m.high, 1.0), y), xytext=(4, -3), textcoords="offset points", fontsize=8)
    for y, row in zip(ys[len(bars):], pub):
        ax1.barh(y, row["MRR"], color="white", edgecolor="#616161", hatch="///")
        ax1.annotate(f"{row['MRR']:.2f}", (row["MRR"], y), xytext=(4, -3), textcoords="offset points", fontsize=8)
    ntp = published_mrr(work.dataset, "NTPλ") if work.dataset else None
    if ntp is not None:
        ax1.axvline(ntp, color="black", ls="--", lw=1)
    names = [f"published: {r['model']} (optimistic" + ("; dashed line)" if r["model"] == "NTPλ" else ")")
             for r in pub]
    ax1.set_yticks(ys, [n for n, _ in bars] + names, fontsize=8)
    split = "the whole test split" if lp.whole_split else f"the first {lp.queries} of {lp.test_size} test triples"
    ax1.set_xlim(0, 1.1)
    ax1.set_xlabel(f"realistic filtered MRR, {split}\n(bars: 99% interval over its {2 * lp.queries} ranks; dashed: "
                   "NTPλ's, kg_mrr's threshold)", fontsize=8)
    ax1.set_title(f"ranks on {graph_label(cfg.kg)}: this run's scorers beside the published rows", fontsize=9)
    return fig


def throughput_figure(run, found: Findings):
    """Candidates/s: the decided rate (`found.speed`) with its 99% interval against the targets, beside the search's
    versions and the floor (`found.throughput`: indicative medians of a few rounds on a slice, p20-p80).
    -> matplotlib Figure"""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    cfg = run.cfg
    fig, ax2 = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    short = {"expand every step": "today's search: every step expands", "last step closes": "last step closes",
             "last step closes, policy where a proof closes": "... + policy where a proof closes"}
    vcol = colors([r["version"] for r in found.throughput or []], list(SEARCHES))
    items = [(short.get(r["version"], r["version"]), Measured(r["cand/s"], r["p20"], r["p80"]), vcol[r["version"]],
              False) for r in found.throughput or []]
    if found.speed is not None:   # the decided rate: its 99% interval in brackets; the versions' p20-p80 apart
        items.insert(0, ("the targets' measurement (whole split)", found.speed.measured, "black", True))
    finite = [x for _, m, _, _ in items for x in (m.low, m.value, m.high) if 0 < x < math.inf]
    lo, hi = min(finite + [c.at_least for c in KG_SPEED]) / 2, max(finite) * 2
    y2 = list(range(len(items)))[::-1]
    for y, (_, m, c, decided) in zip(y2, items):
        a, b = max(m.low, lo), min(m.high, hi)
        ax2.plot([a, b], [y, y], color=c, lw=5 if decided else 2, solid_capstyle="butt")
        ax2.plot([m.value], [y], "o", color=c, mec="white" if decided else c)
        text = (f"{value_text(m.value, m.low, m.high)} (99% interval)" if decided else
                f"{m.value:,.0f} (p20-p80 {m.low:,.0f}-{m.high:,.0f})" if m.high > m.low else f"{m.value:,.0f}")
        ax2.annotate(text, (m.value, y), xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7)
    here = [c for c in KG_SPEED if not c.off_setup(cfg, run.device.type)]
    for i, c in enumerate(sorted(here, key=lambda c: c.at_least)):
        ax2.axvline(c.at_least, color="#9e9e9e", lw=1, ls="--")
        ax2.annotate(f"{c.key} {c.rule_text}", (c.at_least, 0.0), xycoords=("data", "axes fraction"),
                     xytext=(3, 3 + 10 * i), textcoords="offset points", fontsize=7, color="#616161")
    ax2.set_xscale("log")
    ax2.set_xlim(lo, hi)
    decades = [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    ax2.xaxis.set_major_locator(FixedLocator(decades))
    ax2.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if x < 1e5 else f"{x / 1e6:g}M"
                                                if x >= 1e6 else f"{x / 1e3:g}k"))
    ax2.xaxis.set_minor_formatter(NullFormatter())
    ax2.set_yticks(y2, [n for n, *_ in items], fontsize=8)
    ax2.set_ylim(-0.6, len(items) - 0.2)
    ax2.set_xlabel(f"candidates per second, search + ComplEx ({run.device.type}, search_batch={cfg.search_batch}); "
                   f"the versions and the floor: the candidates of {THROUGHPUT_QUERIES} test triples, median and "
                   f"p20-p80 of {THROUGHPUT_ROUNDS} rounds (indicative)", fontsize=8, wrap=True)
    ax2.set_title("throughput: the decided rate beside the search's versions", fontsize=9)
    return fig


# ---- the claims' evidence -------------------------------------------------------------------------------------

def evidence(run, found: Findings) -> dict[str, Evidence]:
    """Each claim's Evidence, keyed by claim (what `card.judge` takes), read from `found` alone: the split's MRRs
    against NTPλ's, the mined rules' and ComplEx alone's, the tie share (`rank_split`, exact), and the one throughput
    decision (`decide_speed`) judged against each speed target of this setup."""
    cfg, lp, dataset = run.cfg, found.lp, found.work.dataset
    name, dt = graph_label(cfg.kg), run.device.type
    fit = lp.results["fitted"]
    mrr = fit.metrics["realistic"]["MRR"]
    size = "the whole test split" if lp.whole_split else f"the first {lp.queries} of {lp.test_size} test triples"
    here = (f"realistic MRR {mrr:.3f} (optimistic {fit.metrics['optimistic']['MRR']:.3f}, pessimistic "
            f"{fit.metrics['pessimistic']['MRR']:.3f}) on {size} of kg={name}")
    ntp = published_mrr(dataset, "NTPλ") if dataset else None
    ranks = fit.ranks["realistic"]
    n = f"99% interval over its {len(ranks)} ranks"
    out = {"kg_mrr": Evidence(None, f"{here}; no published NTPλ figure for this graph") if ntp is None else
           Evidence(mrr_interval(ranks, value=mrr - ntp), f"{here} against NTPλ {ntp:.2f} ({mrr - ntp:+.3f}; {n})")}
    if lp.rules_only is None:
        out["kg_rules"] = Evidence(None, f"kg={name}: no mined rules")
    else:
        r = lp.rules_only["metrics"]["MRR"]
        out["kg_rules"] = Evidence(mrr_interval(ranks, minus=lp.rules_only["ranks"], value=mrr - r),
                                   f"{here}; the mined rules alone {r:.3f} ({mrr - r:+.3f}; paired {n})")
    alone_ranked = lp.results["embedding alone"]
    alone = alone_ranked.metrics["realistic"]["MRR"]
    out["kg_proofs"] = (Evidence(None, f"kg={name}: no valid split: ComplEx alone is the score") if not lp.fit_queries
                        else Evidence(mrr_interval(ranks, minus=alone_ranked.ranks["realistic"], value=mrr - alone),
                                      f"{here}; ComplEx alone {alone:.3f} ({mrr - alone:+.3f}, fitted on "
                                      f"{lp.fit_queries} valid triples; paired {n})"))
    out["kg_ties"] = Evidence(Measured.exact(fit.tie_share), f"{fit.tie_share:.1%} of the positives' ranks tie with a "
                              f"failed corruption on {size} (the prover alone: {lp.results['prover alone'].tie_share:.1%})")
    one = f"one pass: {lp.candidates_per_s:,.0f} candidates/s over {lp.candidates:,} candidates ({size}, {dt})"
    d = found.speed
    decided = max((c for c in KG_SPEED if not c.off_setup(cfg, dt)), key=lambda c: c.at_least, default=None)
    for c in KG_SPEED:
        if d is None or c.off_setup(cfg, dt):
            out[c.key] = Evidence(None, f"{one}; one pass is not judged")
        elif c is decided:
            out[c.key] = Evidence(d, f"total candidates over total seconds of {d.rounds} batch-sized groups of the "
                                     f"test scoring, warm, cycling through {size} ({dt}, search_batch="
                                     f"{lp.config.search_batch}; {one})")
        else:
            out[c.key] = Evidence(d.measured, f"{decided.key}'s decision, the same measurement judged against "
                                              f"{c.rule_text} ({d.rounds} batch-sized groups, {dt})")
    return out
