"""`perflab diagnose` checked against the four seed reports: each study's baseline diagnosed, every finding of its
report looked up among diagnose's at the kind and line it names, and each optimized version's diagnosis compared.

    recorded = record(out_dir)        # every step of STUDIES diagnosed, one JSON each (outputs/diagnose/<commit>/)
    print(page(out_dir))              # docs/diagnose.md: the tables, from the recorded JSON

A report's finding (the `REPORT` list of the study's `diagnosis` module) gives the kind diagnose should name and where:
"file:text" (the line of that file holding the text), or None (the step: launch-bound). It is found when a finding of
that kind is at that line (`hot`: and its op names that function). Findings that are not mechanisms (the algorithm,
a size sweep, precision) say why they are out of diagnose's reach; they are not in the found-rate.

Each optimized version: every kind's amount per step beside the baseline's (host syncs, copies, ops, recompiles per
step; a share where the kind has no count), and the kinds its code lacks by design (`Pair.lacks`): none of them may
appear.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]       # src/perflab
SYNC, COPY, RECOMPILE, GRAPH_BREAK = "host sync", "host-to-device copy", "recompile", "graph break"
LAUNCH, LOOP, DATA = "launch-bound", "Python loop of small ops", "data loading"


@dataclasses.dataclass(frozen=True)
class Version:
    name: str                  # its file's name under the recording folder: "<study>-<name>.json"
    setup: str                 # "module:function": returns the step
    kwargs: tuple = ()         # the builder's keywords, as (name, value) pairs


@dataclasses.dataclass(frozen=True)
class Pair:
    baseline: Version
    optimized: tuple           # Versions
    lacks: tuple = ()          # per optimized version (same order): the kinds its code lacks by design
    note: str = ""             # what a reader must know to compare them (work per step)


@dataclasses.dataclass(frozen=True)
class Study:
    key: str
    seed: str
    title: str
    report: str                # "module:attribute" of the report's findings
    pairs: tuple
    library: tuple = ()        # modules counted as library (their callers' lines are named)


def _v(name: str, setup: str, **kw) -> Version:
    return Version(name, setup, tuple(sorted(kw.items())))


STUDIES = (
    Study("probe1d", "000", "Probe1D: notebooks 01 and 02", "perflab.probe1d.diagnosis:REPORT", (
        Pair(_v("baseline", "perflab.probe1d.diagnosis:baseline_step"),
             (_v("optimized", "perflab.probe1d.diagnosis:optimized_step"),), ((COPY, RECOMPILE, DATA),)),)),
    Study("prover", "001", "prover evaluation: notebooks 03 (evaluation) and 04 (early exit)",
          "perflab.prover.evaluation.diagnosis:REPORT", (
              Pair(_v("eval-baseline", "perflab.prover.evaluation.diagnosis:baseline_step"),
                   (_v("eval-optimized", "perflab.prover.evaluation.diagnosis:optimized_step"),), ((RECOMPILE,),)),
              Pair(_v("early-exit-full", "perflab.prover.early_exit.diagnosis:baseline_step"),
                   (_v("early-exit-recycle", "perflab.prover.early_exit.diagnosis:optimized_step"),), ((RECOMPILE,),))),
          library=("perflab.prover.core",)),
    Study("vae", "002", "mixture VAE: notebook 05", "perflab.vae.diagnosis:REPORT", (
        Pair(_v("baseline", "perflab.vae.diagnosis:baseline_step"),
             (_v("optimized", "perflab.vae.diagnosis:optimized_step"),
              _v("captured", "perflab.vae.diagnosis:captured_step")),
             ((SYNC, COPY, DATA), (SYNC, COPY, DATA, GRAPH_BREAK))),)),
    Study("latentwire", "003", "LatentWire: notebook 06", "perflab.latentwire.diagnosis:REPORT", (
        Pair(_v("baseline", "perflab.latentwire.diagnosis:baseline_step"),
             (_v("optimized", "perflab.latentwire.diagnosis:optimized_step"),), ((SYNC, COPY),),
             note="a step is 2 micro-batches: 2 samples on the baseline (batch 1), 16 on the optimized (batch 8)"),)),
)


def _load(spec: str):
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


# ---- what diagnose costs: a 10-ms step of a user's ---------------------------------------------------------------
def cost_step(batch: int = 256, width: int = 256, depth: int = 4, seed: int = 0):
    """A user's training step of about 10 ms on this CPU with one thread (an MLP on a fixed batch: forward,
    cross-entropy, backward, Adam; its loss read every step): what the cost of diagnosing a 10-ms step is measured on."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(batch, width, generator=g), torch.randint(0, 10, (batch,), generator=g)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    opt = torch.optim.Adam(model.parameters())

    def train_step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return train_step


def cost(out: Path, *, threads: int = 1) -> dict:
    """`perflab diagnose --setup perflab.runner.reports:cost_step` as a user runs it (a new process: imports included),
    timed, its JSON kept as `<out>/cost.json`; -> {"command_s", "diagnosis": its JSON}."""
    import os
    import resource
    import subprocess
    import sys
    import time

    load = os.getloadavg()[0]   # what else this machine was running (its 1-minute load average)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "perflab.runner.cli", "diagnose", "--setup", "perflab.runner.reports:cost_step",
                    "--threads", str(threads), "--device", "cpu", "--json", str(out / "cost.json")],
                   check=True, capture_output=True, text=True)
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)   # the command's own CPU time: its work, not waits
    d = json.loads((out / "cost.json").read_text())
    _save_portable(d, out / "cost.json")
    (out / "cost-command.json").write_text(json.dumps({"command_s": took, "cpu_s": cpu, "load_before": load,
                                                       "load_after": os.getloadavg()[0], "cpus": os.cpu_count()},
                                                      indent=1) + "\n")
    return {"command_s": took, "diagnosis": d}


# ---- recording -----------------------------------------------------------------------------------------------
def record(out: Path, studies=STUDIES, *, threads: int = 1, progress=print, with_cost: bool = True) -> dict[str, Path]:
    """Diagnose every version of `studies` on the CPU (one torch thread: the machine's other core stays free for the
    sampler and the load), writing `<out>/<study>-<version>.json`. -> {name: path}"""
    import torch

    from ..kit.compiles import reset
    from ..kit.diagnosing import diagnose

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for st in studies:
        for pair in st.pairs:
            for v in (pair.baseline, *pair.optimized):
                reset()   # each version compiles from a clean cache, as a fresh process would
                builder, kw = _load(v.setup), dict(v.kwargs)
                d = diagnose(setup=lambda builder=builder, kw=kw: builder(device="cpu", **kw), device="cpu",
                             library_modules=st.library, name=f"{v.setup}{'(' + str(kw) + ')' if kw else ''}")
                path = _save_portable(d.as_dict(), out / f"{st.key}-{v.name}.json")
                written[f"{st.key}-{v.name}"] = path
                progress(f"{st.key}-{v.name}: {len(d.findings)} findings, {d.overhead['wall_s']:.1f} s -> {path}")
    if with_cost:
        c = cost(out, threads=threads)
        progress(f"cost: the command took {c['command_s']:.1f} s on a {c['diagnosis']['step']['mean_s'] * 1e3:.1f} ms "
                 "step")
    return written


def portable(obj):
    """A diagnosis's JSON with no path of this machine in it (committed evidence is read elsewhere): every absolute
    `path` inside the repository made relative to it, any other replaced by its `file` (the path from its package
    root)."""
    root = str(PACKAGE.parents[1]) + "/"
    if isinstance(obj, list):
        return [portable(x) for x in obj]
    if not isinstance(obj, dict):
        return obj.replace(root, "") if isinstance(obj, str) else obj
    out = {k: portable(v) for k, v in obj.items()}
    path = obj.get("path")
    if isinstance(path, str) and path.startswith("/"):
        out["path"] = path[len(root):] if path.startswith(root) else obj.get("file", "")
    return out


def _save_portable(d: dict, path: Path) -> Path:
    from ..kit.diagnosis import write_atomic

    return write_atomic(path, json.dumps(portable(d), indent=1, default=str) + "\n")


def make_portable(out: Path) -> None:
    """Every JSON of a recording folder made portable in place (`portable`: paths only, nothing measured changes)."""
    for p in sorted(out.glob("*.json")):
        _save_portable(json.loads(p.read_text()), p)


# ---- checking -------------------------------------------------------------------------------------------------
def resolve(where: str) -> tuple[str, int | None, str | None]:
    """"file:text" -> (file under src/perflab, the first line of code holding text, None); "file:name" (a Python
    name) -> (file, None, name): any line of that function."""
    import ast

    file, _, text = where.partition(":")
    if text.isidentifier():
        return file, None, text
    source = (PACKAGE / file).read_text()
    docs = set()   # lines of docstrings: prose, not code
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docs |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    hit = next((i for i, t in enumerate(source.splitlines(), 1) if text in t and i not in docs), None)
    if hit is None:
        raise ValueError(f"{where!r}: no line of {file} holds {text!r}")
    return file, hit, None


def _at(f: dict, file: str, line: int | None, function: str | None) -> bool:
    w = f["where"]
    path = (w.get("path") or w.get("file") or "").replace("\\", "/")
    if not path.endswith("/" + file) and path != file:
        return False
    return w.get("line") == line if line is not None else function in (w.get("function") or "")


def check_rows(rows: list[dict], diagnosis: dict) -> list[dict]:
    """Each report row with the finding diagnose gave for it (or None) and whether it counts as found."""
    out = []
    for r in rows:
        hits = []
        if r.get("where") is None:
            hits = [f for f in diagnosis["findings"] if r["kind"] and f["kind"] == r["kind"]]
        else:
            file, line, function = resolve(r["where"])
            hits = [f for f in diagnosis["findings"] if (r["kind"] is None or f["kind"] == r["kind"])
                    and _at(f, file, line, function)]
            r = {**r, "line": line, "file": file}
        if r.get("hot"):
            hits = [f for f in hits if r["hot"] in f["where"].get("op", "").lower()]
        best = hits[0] if hits else None
        out.append({**r, "finding": best, "found": bool(best) if r["mechanism"] else None})
    return out


def amount(diagnosis: dict, kind: str) -> tuple[float, str]:
    """A kind's amount per step in a diagnosis, and its unit: the counters' own numbers for host syncs, copies and
    ops (the launch count: whether or not they made a finding), the loops' ops, recompiles per step, graph breaks,
    and for data loading (a count on one side, a wait on the other) its largest share of the step."""
    c = diagnosis["counts"]
    if kind == SYNC:
        return c["host_syncs"], "per step"
    if kind == COPY:
        return c["host_to_device_copies"], "per step"
    if kind == LAUNCH:
        return c["ops"], "ops per step"
    fs = [f for f in diagnosis["findings"] if f["kind"] == kind]
    if kind == GRAPH_BREAK:
        return float(len(fs)), "lines"
    if kind in (LOOP, RECOMPILE):
        return float(sum(f["count_per_step"] or 0 for f in fs)), "ops per step in loops" if kind == LOOP else "per step"
    return max([(f["share"] or {}).get("value") or 0.0 for f in fs] or [0.0]), "of the step"


COUNTS = (("ops", "ops per step (the launch count)"), ("host_syncs", "host syncs per step"),
          ("host_to_device_copies", "host-to-device copies per step"))


def compare(base: dict, opt: dict, lacks: tuple, report_kinds: tuple = ()) -> list[dict]:
    """Each kind of either diagnosis: its amount on both, and whether the optimized one is gone, smaller, or (a kind
    its code lacks by design) must not be there."""
    kinds = list(dict.fromkeys([f["kind"] for f in base["findings"]] + [f["kind"] for f in opt["findings"]] +
                               list(lacks)))
    rows = []
    for k in kinds:
        (b, unit), (o, _) = amount(base, k), amount(opt, k)
        present = any(f["kind"] == k for f in opt["findings"])
        if k in lacks:
            status = "absent, as it should be" if not present else "**PRESENT: its code lacks it**"
        elif not present:
            status = "gone"
        else:
            status = "smaller" if o < b else "not smaller"
        if k not in report_kinds and k not in lacks:
            status += " (no report's finding)"
        rows.append({"kind": k, "baseline": b, "optimized": o, "unit": unit, "status": status, "lacks": k in lacks})
    for key, label in COUNTS:   # the counters' own numbers, findings or not
        b, o = base["counts"].get(key), opt["counts"].get(key)
        if b is not None and o is not None:
            rows.append({"kind": label, "baseline": b, "optimized": o, "unit": "", "lacks": False,
                         "status": "fewer" if o < b else "the same" if o == b else "more"})
    return rows


def on_optimized(row: dict, opt: dict) -> str:
    """A report's finding found on the baseline, on an optimized version: gone (no finding of its kind at its line),
    or smaller or not (its count, else its share)."""
    f = row["finding"]
    w = f["where"]
    if row.get("where") is None:   # a finding of the whole step (launch-bound): its kind anywhere
        same = [g for g in opt["findings"] if g["kind"] == f["kind"]]
    else:
        same = [g for g in opt["findings"] if g["kind"] == f["kind"] and g["where"].get("path") == w.get("path")
                and g["where"].get("line") == w.get("line")]
    if not same:
        return "gone"
    g = same[0]
    b, o = (f["count_per_step"], g["count_per_step"]) if f["count_per_step"] is not None and \
        g["count_per_step"] is not None else ((f["share"] or {}).get("value"), (g["share"] or {}).get("value"))
    return f"smaller ({_num(b)} -> {_num(o)})" if b is not None and o is not None and o < b else \
        f"**not smaller** ({_num(b)} -> {_num(o)})"


# ---- the page --------------------------------------------------------------------------------------------------
def _num(x) -> str:
    from ..kit.formatting import num

    if x is None:
        return ""
    return f"{x:.1%}" if isinstance(x, float) and x < 1 and x != 0 and x != int(x) else num(x)


def _finding_cell(f: dict | None) -> str:
    if f is None:
        return "none"
    w = f["where"]
    at = f"`{w.get('file', '').split('/')[-1]}:{w['line']}`" if w.get("line") else "(the step)"
    count = f"{_num(f['count_per_step'])} per step" if f["count_per_step"] is not None else ""
    share = f"{f['share']['value']:.1%} of the step" if f.get("share") else ""
    op = w.get("op", "").replace("|", "/")
    op = op if len(op) <= 160 else op[:157] + "..."
    return f"{f['kind']} at {at} ({', '.join(x for x in (count, share) if x)}): {op}"


def study_tables(st: Study, recorded: dict) -> tuple[str, int, int]:
    """The study's two tables as Markdown, and its mechanism findings found and counted."""
    first = st.pairs[0]
    rows = check_rows(_load(st.report), recorded[f"{st.key}-{first.baseline.name}"])
    names = [v.name for v in first.optimized]
    lines = [f"### Seed {st.seed}: {st.title}", "",
             "| finding | the report's words | diagnose's finding on the baseline | found | "
             + " | ".join(f"on `{n}`" for n in names) + " |", "|---|---|---|---|" + "---|" * len(names)]
    found = counted = 0
    for r in rows:
        words = r["words"].replace("|", "/")
        if r["mechanism"]:
            counted += 1
            found += bool(r["found"])
            verdict = "**yes**" if r["found"] else "**no**"
        else:
            verdict = f"out of reach: {r['why']}"
        at = f" (expected: {r['kind']} at `{r['file']}:{r['line']}`)" if r.get("line") else \
            (f" (expected: {r['kind']})" if r.get("kind") and r["mechanism"] else "")
        after = [on_optimized(r, recorded[f"{st.key}-{n}"]) if r["found"] else "" for n in names]
        lines.append(f"| {r['key']} | {words} | {_finding_cell(r['finding'])}{at} | {verdict} | "
                     + " | ".join(after) + " |")
    lines += ["", f"Found: {found} of {counted} mechanism findings.", ""]
    report_kinds = tuple(r["kind"] for r in rows if r["mechanism"])
    for pair in st.pairs:
        base = recorded[f"{st.key}-{pair.baseline.name}"]
        for v, lacks in zip(pair.optimized, pair.lacks):
            opt = recorded[f"{st.key}-{v.name}"]
            lines += [f"Every kind, `{pair.baseline.name}` -> `{v.name}` ({_step_line(base)} -> {_step_line(opt)}"
                      f"{'; ' + pair.note if pair.note else ''}):", "",
                      "| kind | baseline | optimized | |", "|---|---|---|---|"]
            for c in compare(base, opt, lacks, report_kinds):
                lines.append(f"| {c['kind']} | {_num(c['baseline'])} {c['unit']} | {_num(c['optimized'])} "
                             f"{c['unit']} | {c['status']} |")
            lines.append("")
    return "\n".join(lines), found, counted


def _step_line(d: dict) -> str:
    from ..kit.formatting import fmt_seconds

    return f"{fmt_seconds(d['step']['mean_s'])} per step"


def page(out: Path, commit: str) -> str:
    """docs/diagnose.md from the JSON recorded in `out`."""
    recorded = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    parts, total_found, total = [], 0, 0
    for st in STUDIES:
        text, f, n = study_tables(st, recorded)
        parts.append(text)
        total_found += f
        total += n
    cost_text = _cost_text(out)
    head = [
        "# `perflab diagnose` against the four reports",
        "",
        "Each seed report is a diagnosis done by hand. Here `perflab diagnose` runs on each study's baseline and names",
        "the report's findings, each at the kind and line the table gives (the line of the study's baseline, or of the",
        "code it calls), then on each optimized version. Generated by `tools/diagnose-reports.py` from the runs recorded",
        f"under `outputs/diagnose/{commit}/` (one JSON per step, on this 2-core CPU, one torch thread; named for the",
        "commit whose code ran them, which a later rebase of its branch may have renamed: the lines these tables name",
        "are checked again at every commit by `tests/runner/test_reports.py`); the steps are the studies'",
        "`diagnosis.py` builders, usable as `perflab diagnose --setup MODULE:FUNCTION`.",
        "",
        f"**{total_found} of {total} mechanism findings found ({total_found / total:.0%})** (host syncs, copies, "
        "recompiles, launches, loops and batches built in the step); the findings about the algorithm, a size sweep, "
        "precision or the device's memory say why they are out of reach and are not counted.",
        "",
        "A finding is found when diagnose names its kind at its line; the second table of each study compares each",
        "kind's amount per step on the baseline and on an optimized version: gone, smaller, or not; a kind the",
        "optimized code lacks by design must be absent.",
        "",
    ] + cost_text
    return "\n".join(head + parts + READING)


READING = [
    "### Reading the tables",
    "",
    "A report's finding is gone on an optimized version when no finding of its kind is at its line there; the kind's "
    "amount beside it says what the optimized code does instead. Where a kind's amount is not smaller and is no "
    "report's finding, the optimized version does that on purpose: the prover's two evaluation loops both run the "
    "engine library's rollout, which reads \"all done?\" on the host every step (study 4's recycled slots read less); "
    "the VAE's sync-free step issues more small ops than the original (a presence table, one-hot matmuls) and its "
    "captured step is what cuts them. LatentWire's optimized step runs 8x the samples per step in a loop of "
    "micro-batches, each with its own backward (more ops in its loop), and its DataLoader's worker shares this "
    "machine's two cores with the step, so the step waits for it (notebook 06 found the DataLoader and "
    "pre-tokenization do not pay on this CPU); the report's own findings there, the K-token loop and the batches built "
    "in the step, are gone.",
    "",
    "Each JSON under the recording folder is `perflab diagnose --json`'s (docs/command.md's schema); the page is "
    "`tools/diagnose-reports.py --page-only FOLDER` from them. A step's lines are those of this commit's code: "
    "`tests/runner/test_reports.py` diagnoses each baseline at small sizes and checks the same findings on every run "
    "of `make test`.",
]


def _cost_text(out: Path) -> list[str]:
    """The cost of diagnosing a 10-ms step, from `<out>/cost.json` and `cost-command.json` (if recorded)."""
    from ..kit.formatting import fmt_seconds

    if not (out / "cost.json").exists():
        return []
    d = json.loads((out / "cost.json").read_text())
    c = json.loads((out / "cost-command.json").read_text())
    command = c["command_s"]
    load = (f" ({c['cpu_s']:.1f} s of CPU time: the rest was waiting for a core, the machine's load average "
            f"{c['load_before']:.1f} before and {c['load_after']:.1f} after on {c['cpus']} cores)") if "cpu_s" in c else ""
    o, st = d["overhead"], d["step"]
    return [
        "### What diagnosing costs",
        "",
        f"`perflab diagnose --setup perflab.runner.reports:cost_step` (a user's training step: an MLP, forward, "
        f"backward, Adam, its loss read) on this CPU, one thread: the step takes {fmt_seconds(st['mean_s'])} "
        f"[{fmt_seconds(st['low_s'])}, {fmt_seconds(st['high_s'])}] (mean of {st['calls']} timed calls, 99% "
        f"interval); the command took **{command:.1f} s** from start to exit, imports included (the target: under "
        f"30 s){load}; the diagnosis itself {fmt_seconds(o['wall_s'])}, of which {fmt_seconds(o['step_calls_s'])} were the "
        f"step's own calls and {fmt_seconds(o['own_s'])} diagnose's own (counting, sampling's bookkeeping, the "
        f"rules); none of it is in the step's time, which comes from calls with no instrument. The line sampler "
        f"changed a sampled call's mean by {100 * o['sampling_slowdown']:+.0f}% against the timed calls' (noise "
        f"included), and a counted call took {o['counting_slowdown']:.1f}x a step (the profiler, the modes, the "
        f"frames).",
        "",
    ]
