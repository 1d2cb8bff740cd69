"""From what diagnose saw (`perflab.kit.diagnosing.Observed`) to findings: one rule per kind, each naming its line.

- host sync / host-to-device copy: every sync the sync counter saw, grouped by kind and by the user's line
  (`count_host_syncs(sites=True)`); the copies are its "to(device) from host", "tensor(host list) -> device" and
  "copy_(from host)". Any count above zero is a finding: a CPU run pays little for one, a GPU run a drained queue.
- recompile: each recompile of a frame (dynamo's reason), grouped by the line that called the compiled function;
  its count is per step at steady state (after the warm-up), or, where all came in the warm-up, the seconds paid once.
- graph break: each break dynamo logged, at its line, with its reason.
- Python loop of small ops: a `for`/`while`/comprehension of the user's code whose body issues at least LOOP_OPS ops
  per step (the launch count's ops, credited to the innermost loop on their stack; its share likewise: the samples
  whose innermost loop it is, so an outer loop does not count its inner loops' time), most of them small: over at most
  SMALL_ELEMENTS elements (the largest input's), which a GPU runs in about the time it takes to launch them (2^20
  float32 elements read twice and written once are 12 MB: ~4 us at an H100's 3 TB/s, a launch ~5 us), so what
  a CPU run sees of their size is what a GPU run would pay per launch.
- launch-bound: a step of at least LAUNCH_OPS ops per step, most of them small; its share is the time the host needs
  just to issue them (ops x the floor, measured here: `Observed.op_floor_s`, one tiny op's host time), on CUDA the
  device's idle share of the step (torch.profiler).
- data loading: time in torch's DataLoader at DATA_SHARE of the step or more; or a line of the step that builds tensors
  from Python data on the host (a batch built by hand, tokenized in the step), any count: the line's share is what it
  costs here, and the functions it calls (counted) say what it does.
- memory: a peak of MEMORY_SHARE of the device's memory or more in one step.
- far from the floor: a step at FLOOR_RATIO times the floor it was given or more.
- CUDA-graph lifetime: an output of a CUDA-graph replay read after the next one overwrote it.
Shares come from the line sampler (`perflab.kit.sampling`): the samples whose user stack passes the finding's line
(a loop: any line of it), with the 99% interval over groups of calls.
"""
from __future__ import annotations

import ast
import collections
import functools
import linecache
import math

from .diagnosis import (
    COPY,
    DATA,
    FLOOR,
    GRAPH_BREAK,
    HOST_SYNC,
    KINDS,
    LAUNCH_BOUND,
    LIFETIME,
    LOOP,
    MEMORY,
    RECOMPILE,
    Finding,
)
from .formatting import fmt_seconds, num
from .frames import Site, short_path
from .judge import Measured

LOOP_OPS = 32           # ops per step a loop's body issues, at least, to be a finding
LAUNCH_OPS = 32         # ops per step, at least, for a launch-bound step
SMALL_ELEMENTS = 2**20  # an op over at most this many elements is small (module doc)
SMALL_MOST = 0.5        # ... and a loop or a step is of small ops when more than this share of its ops are small
DATA_SHARE = 0.05       # of the step, at least, for a data-loading finding
MEMORY_SHARE = 0.25     # of the device's memory, at least, for a memory finding
FLOOR_RATIO = 2.0       # times the floor, at least, for a far-from-the-floor finding
COPIES = ("to(device) from host", "tensor(host list) -> device", "copy_(from host)")

# the fix of each kind, and the study whose notebook shows it
FIXES = {
    "read": ("keep the value on the device and read it once per N steps (a device buffer), or decide on the device "
             "(torch.where)", "05_vae_sync"),
    "shape": ("a fixed-size formulation: a table over a declared range, torch.where, index_add_; repeat_interleave "
              "with output_size=, or indices built once", "05_vae_sync, 02_slab_stats"),
    "synchronize": ("drop the synchronize from the step: time with the kit's Stopwatch or CUDA events instead",
                    "06_latentwire_amp"),
    COPY: ("move it once before the loop, or pin_memory() the host tensor and .to(device, non_blocking=True)",
           "06_latentwire_amp, 02_slab_stats"),
    RECOMPILE: ("one shape for every call: pad to a fixed size (or mark the dimension dynamic) and warm up at it",
                "03_eval"),
    GRAPH_BREAK: ("keep the step traceable: no host read or Python side effect inside it (fullgraph=True names each "
                  "break)", "05_vae_sync"),
    LAUNCH_BOUND: ("fewer, larger ops: torch.compile the step, replay it as a CUDA graph (reduce-overhead), a bigger "
                   "batch", "05_vae_sync, 06_latentwire_amp"),
    LOOP: ("one whole-tensor op instead of the loop: index_add_, a one-hot matmul, one batched loss", "02_slab_stats, "
           "05_vae_sync, 06_latentwire_amp"),
    DATA: ("build batches off the critical path: tokenize once before training, a DataLoader with workers and "
           "pin_memory", "06_latentwire_amp"),
    MEMORY: ("chunk the work to a size that fits, and halve it on out-of-memory", "03_eval"),
    FLOOR: ("see what holds the step above its floor: the findings above, then fusion and precision",
            "02_slab_stats, 06_latentwire_amp"),
    LIFETIME: ("clone an output that outlives the next replay; cudagraph_mark_step_begin() where a step starts",
               "03_eval"),
}
SHAPE_OPS = ("unique", "unique_consecutive", "nonzero", "argwhere", "masked_select", "bincount", "where(cond)",
             "repeat_interleave")


def findings(obs) -> list[Finding]:
    """Every finding of the rules above, ranked by cost (module doc)."""
    ctx = _Context(obs)
    found = (_syncs(ctx) + _recompiles(ctx) + _graph_breaks(ctx) + _loops(ctx) + _launch_bound(ctx)
             + _data_loading(ctx) + _memory(ctx) + _floor(ctx) + _lifetime(ctx))
    return rank(found, ctx.mean)


def rank(found: list[Finding], step_s: float) -> list[Finding]:
    """A lifetime error first (the numbers are wrong); then by cost: the share of the step, or for what is paid once
    its seconds against one step; then by kind and count."""
    def cost(f: Finding) -> float:
        if f.share is not None:
            return f.share.value
        return f.once_s / step_s if f.once_s and step_s > 0 else 0.0
    return sorted(found, key=lambda f: (f.kind != LIFETIME, -cost(f), KINDS.index(f.kind), -(f.count or 0)))


class _Context:
    def __init__(self, obs):
        self.obs = obs
        self.mean = sum(obs.times) / len(obs.times)
        self.k = obs.counted_calls

    def strip(self, stack: tuple) -> tuple:
        """The stack without the caller's frames above the step."""
        outer = self.obs.outer
        return stack[:-len(outer)] if outer and stack[-len(outer):] == outer else stack

    def share(self, hit=None, inner: set | None = None) -> Measured | None:
        v, low, high = self.obs.sampler.share(hit, inner=inner)
        return None if math.isnan(v) else Measured(v, min(low, v), max(high, v))

    def at_line(self, site: Site) -> Measured | None:
        """The share of the samples at `site` (or below it), compiling left out (the recompile finding's)."""
        return self.share(lambda stack, tag: tag != "compile" and
                          any(s.line == site.line and s.file == site.file for s in stack))


def counts(obs) -> dict:
    """The counters' numbers per step, as the JSON's `counts` (docs/command.md)."""
    k, s, la = obs.counted_calls, obs.syncs, obs.launches
    copies = sum(n for (op, _), n in s.by_site.items() if op in COPIES)
    syncs = sum(s.by_site.values()) - copies
    cc = obs.compiles
    return {"counted_calls": k, "host_syncs": syncs / k, "host_to_device_copies": copies / k,
            "host_syncs_by_op": {op: n / k for op, n in s.by_op.items() if op not in COPIES},
            "optimizer_host_reads": sum(s.host_reads.values()) / k,
            "ops": la.total / k, "ops_are": la.what, "graph_calls": la.graph_calls / k,
            "top_ops": {op: n / k for op, n in la.by_op.most_common(8)},
            "host_tensors_from_python_data": sum(obs.host_data.values()) / k,
            "compiles": cc.compiles, "recompiles": cc.recompiles, "graphs": cc.graphs,
            "compiles_in_warmup": obs.compiles_before_timing, "graph_breaks": len(cc.graph_breaks),
            "cudagraph_recordings": cc.cudagraph_recordings, "warmup_calls": obs.warmup,
            "peak_bytes": obs.peak_bytes, "device_memory_bytes": obs.memory_total, "op_floor_s": obs.op_floor_s,
            "floor_s": obs.floor_s, "device_busy": obs.device_busy}


# ---- host syncs and copies ----------------------------------------------------------------------------------------
def _syncs(ctx: _Context) -> list[Finding]:
    groups: dict = collections.defaultdict(lambda: {"ops": collections.Counter(), "stacks": collections.Counter(),
                                                    "calls": set()})
    for (op, raw), n in ctx.obs.syncs.by_site.items():
        stack = ctx.strip(raw)
        site = stack[0] if stack else None
        g = groups[(COPY if op in COPIES else HOST_SYNC, site)]
        g["ops"][op] += n
        g["stacks"][stack] += n
        g["calls"] |= set(ctx.obs.syncs.callers.get((op, raw), ()))
    out = []
    for (kind, site), g in groups.items():
        n = sum(g["ops"].values())
        ops = ", ".join(f"{op} x{_x(c / ctx.k)}" if len(g["ops"]) > 1 else op for op, c in g["ops"].most_common())
        fix, study = FIXES[kind if kind == COPY else _sync_family(g["ops"])]
        # its share: the samples at the very line that made the call (in the user's code or a library's)
        out.append(Finding(kind, site, ops, n / ctx.k, ctx.share(inner=g["calls"]),
                           evidence=f"count_host_syncs(sites=True): {n} in {ctx.k} counted call(s); the share is the "
                                    "time at the line that made the call",
                           fix=fix, study=study, stack=g["stacks"].most_common(1)[0][0],
                           detail=_via(g["stacks"].most_common(1)[0][0])))
    return out


def _sync_family(ops: collections.Counter) -> str:
    top = ops.most_common(1)[0][0]
    if top == "synchronize":
        return "synchronize"
    return "shape" if top in SHAPE_OPS or "bool mask" in top else "read"


def _x(n: float) -> str:
    """A count per step as the ops column shows it: '16,384', '82.3', '2'."""
    return f"{n:,.0f}" if n >= 1000 else f"{n:.3g}"


def _via(stack: tuple) -> str:
    """'via a.py:3 (f) <- b.py:9 (g)': the callers of a finding's line, up to three."""
    callers = " <- ".join(f"{s.short} ({s.function})" for s in stack[1:4])
    return f"via {callers}" if callers else ""


# ---- compiles -------------------------------------------------------------------------------------------------------
def _recompiles(ctx: _Context) -> list[Finding]:
    obs = ctx.obs
    events = [(i, e) for i, e in enumerate(obs.compiles.events) if e.recompile and not e.cudagraph]
    groups: dict = collections.defaultdict(list)
    for i, e in events:
        stack = ctx.strip(e.stack)
        groups[(stack[0] if stack else None, e.code)].append((i, e, stack))
    steady_s = sum(obs.times) + sum(obs.sampled_times)
    out = []
    for (site, code), evs in groups.items():
        steady = [e for i, e, _ in evs if i >= obs.compiles_before_timing]
        seconds = sum(e.seconds for _, e, _ in evs)
        reasons = collections.Counter(e.reason or "(no reason recorded)" for _, e, _ in evs)
        top = reasons.most_common(1)[0][0]
        what = f"{code.function} ({short_path(code.file)}:{code.line})" if code else "a compiled frame"
        detail = (f"{len(evs)} recompile(s) of {what}, {len(steady)} after the warm-up; reasons: "
                  + "; ".join(f"{r} (x{c})" for r, c in reasons.most_common(3)))
        share = None
        if steady:   # the sampler's share of compiling (all compiles: a sampled call's); else the compiles' seconds
            share = ctx.share(lambda stack, tag, site=site: tag == "compile" and (site is None or site in stack))
            if share is None or share.value == 0:
                v = min(1.0, sum(e.seconds for e in steady) / steady_s) if steady_s > 0 else 0.0
                share = Measured(v, v, v)
        fix, study = FIXES[RECOMPILE]
        out.append(Finding(RECOMPILE, site, top, len(steady) / obs.steady_calls if steady else None, share,
                           evidence="count_compiles(details=True): dynamo's compile callbacks and its recompile reason",
                           fix=fix, study=study, stack=evs[0][2], detail=detail,
                           once_s=None if steady else seconds))
    return out


def _graph_breaks(ctx: _Context) -> list[Finding]:
    groups: dict = collections.defaultdict(list)
    for b in ctx.obs.compiles.graph_breaks:
        groups[(b.site.file, b.site.line)].append(b)
    out = []
    for (file, line), bs in groups.items():
        site = Site(file, line, _function_at(file, line))
        reasons = collections.Counter(b.reason for b in bs)
        fix, study = FIXES[GRAPH_BREAK]
        out.append(Finding(GRAPH_BREAK, site, reasons.most_common(1)[0][0], None, ctx.at_line(site),
                           evidence=f"count_compiles(details=True): dynamo's graph_breaks log ({len(bs)} logged)",
                           fix=fix, study=study, stack=(site,), detail=(bs[0].detail.splitlines() or [""])[0]))
    return out


# ---- ops: loops and launches --------------------------------------------------------------------------------------
def _small_counts(ctx: _Context) -> collections.Counter:
    """{(op, stack): ops over at most SMALL_ELEMENTS elements} (the stacks as the launch counter keeps them)."""
    small: collections.Counter = collections.Counter()
    for (op, stack, bits), n in ctx.obs.launches.sizes.items():
        if bits <= SMALL_ELEMENTS.bit_length():
            small[(op, stack)] += n
    return small


def _loops(ctx: _Context) -> list[Finding]:
    small = _small_counts(ctx)
    own: dict = collections.defaultdict(collections.Counter)       # loop -> op -> count (ops whose innermost loop)
    own_small: collections.Counter = collections.Counter()
    stacks: dict = {}
    for (op, raw), n in ctx.obs.launches.op_sites.items():
        stack = ctx.strip(raw)
        loops = [(s, lp) for s in stack if (lp := _loop_at(s.file, s.line)) is not None]
        if not loops:
            continue
        key = (loops[0][0].file, loops[0][1])
        own[key][op] += n
        own_small[key] += small[(op, raw)]
        stacks.setdefault(key, stack)
    out = []
    for key, ops in own.items():
        total = sum(ops.values())
        n = total / ctx.k
        if n < LOOP_OPS or own_small[key] <= SMALL_MOST * total:
            continue
        file, (start, end, fn) = key
        share = ctx.share(lambda stack, tag, key=key: tag != "compile" and _innermost_loop(stack) == key)  # its own
        per_op = share.value * ctx.mean / n if share else math.nan
        site = Site(file, start, fn)
        fix, study = FIXES[LOOP]
        top = ", ".join(f"{op.removeprefix('aten::')} x{_x(c / ctx.k)}" for op, c in ops.most_common(4))
        out.append(Finding(LOOP, site, top, n, share,
                           evidence=f"count_launches(sites=True): {num(n)} ops per step from the loop's body, "
                                    f"{own_small[key] / total:.0%} of them small (<= 2^20 elements); "
                                    f"{fmt_seconds(per_op)} per op here",
                           fix=fix, study=study, stack=stacks[key],
                           detail=f"lines {start}-{end} of {short_path(file)}"))
    return out


def _innermost_loop(stack: tuple):
    """(file, loop) of the innermost frame of `stack` that is inside a loop of the user's code, or None."""
    for s in stack:
        lp = _loop_at(s.file, s.line)
        if lp is not None:
            return s.file, lp
    return None


def _launch_bound(ctx: _Context) -> list[Finding]:
    obs = ctx.obs
    ops = obs.launches.total / ctx.k
    small = sum(_small_counts(ctx).values()) / ctx.k
    if ops < LAUNCH_OPS or small <= SMALL_MOST * ops:
        return []
    by_line = collections.Counter()
    for stack, n in obs.launches.by_site.items():
        stack = ctx.strip(stack)
        by_line[stack[0] if stack else None] += n
    site, top_n = by_line.most_common(1)[0]
    s = Measured.from_samples(obs.times)
    if obs.device_busy:   # CUDA: the device's idle share of the step
        idle = max(0.0, 1 - obs.device_busy["busy_s"] / obs.device_busy["wall_s"])
        share, how = Measured(idle, idle, idle), (f"torch.profiler: the GPU busy {obs.device_busy['busy_s']:.3g} s of "
                                                  f"{obs.device_busy['wall_s']:.3g} s")
    else:
        issue = ops * obs.op_floor_s
        share = Measured(min(1.0, issue / s.value), min(1.0, issue / s.high) if s.high > 0 else 0.0,
                         min(1.0, issue / s.low) if s.low > 0 else 1.0)
        how = f"issuing them alone takes {num(ops)} x {fmt_seconds(obs.op_floor_s)} (one tiny op, measured here)"
    fix, study = FIXES[LAUNCH_BOUND]
    tops = ", ".join(f"{op.removeprefix('aten::')} x{_x(n / ctx.k)}" for op, n in obs.launches.by_op.most_common(3))
    lines = "; ".join(f"{x.short if x else '(no user line)'}: {num(n / ctx.k)}" for x, n in by_line.most_common(3))
    return [Finding(LAUNCH_BOUND, site, tops, ops, share,
                    evidence=f"count_launches: {num(ops)} {obs.launches.what} per step, {small / ops:.0%} small "
                             f"(<= 2^20 elements), {fmt_seconds(ctx.mean / ops)} each here; {how}",
                    fix=fix, study=study, stack=(site,) if site else (),
                    detail=f"ops per line: {lines}")]


# ---- data, memory, floor, lifetimes ------------------------------------------------------------------------------
def _data_loading(ctx: _Context) -> list[Finding]:
    obs, out = ctx.obs, []
    loader = ctx.share(lambda stack, tag: tag == "loader")
    if loader is not None and loader.value >= DATA_SHARE:
        seen = [ctx.strip(st) for st, tag in zip(obs.sampler.stacks, obs.sampler.tags) if tag == "loader" and st]
        entries = collections.Counter(_entry(st) for st in seen if st)
        site = entries.most_common(1)[0][0] if entries else None
        inner = collections.Counter(f"{st[0].function} ({st[0].short})" for st in seen if st and st[0] != site)
        fix, study = FIXES[DATA]
        out.append(Finding(DATA, site, "waiting for the DataLoader", None, loader,
                           evidence="line sampler: samples inside torch.utils.data", fix=fix, study=study,
                           stack=(site,) if site else (),
                           detail=f"in the loader: {inner.most_common(1)[0][0]}" if inner else ""))
    builds: dict = collections.defaultdict(collections.Counter)
    for stack, n in obs.host_data.items():
        stack = ctx.strip(stack)
        if stack:
            builds[_entry(stack)][stack] += n
    for site, stacks in builds.items():   # any count: the step waits while the host builds its batch
        n = sum(stacks.values()) / ctx.k
        stack = stacks.most_common(1)[0][0]
        under = _called_under(ctx, site, stack)
        fix, study = FIXES[DATA]
        out.append(Finding(DATA, site, f"{num(n)} host tensors from Python data per step; under it per step: {under}",
                           n, ctx.at_line(site),
                           evidence="torch.tensor/as_tensor/from_numpy of Python data counted under the line, the "
                                    "functions it calls counted (sys.setprofile), its time from the line sampler",
                           fix=fix, study=study, stack=stack, detail=_hottest_below(ctx, site)))
    return out


def _called_under(ctx: _Context, site: Site, stack: tuple) -> str:
    """The user's functions the line `site` calls, directly or not, with their calls per step (the counted calls'
    call graph), most called first: 'tokenize_example x2, Tokenizer.encode x6'."""
    i = next((j for j, s in enumerate(stack) if s == site), None)
    if not i:   # the build is at the line itself
        return "the line itself"
    callee = (stack[i - 1].file, stack[i - 1].function)
    children = collections.defaultdict(collections.Counter)
    for (caller, fn), n in ctx.obs.calls.items():
        children[caller][fn] += n
    seen, todo, calls = {callee}, [callee], collections.Counter()
    calls[callee] = sum(n for (_, fn), n in ctx.obs.calls.items() if fn == callee)
    while todo:
        for fn, n in children[todo.pop()].items():
            calls[fn] += n
            if fn not in seen:
                seen.add(fn)
                todo.append(fn)
    named = [(name.rsplit(".<locals>.", 1)[-1], n) for (_, name), n in calls.most_common()
             if not name.endswith(("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>", "<lambda>"))]
    return ", ".join(f"{name} x{_x(n / ctx.k)}" for name, n in named[:6]) or "no function of the user's"


def _entry(stack: tuple) -> Site:
    """The line of the step that leads to a build: the outermost frame of the stack (the step's own code), or the
    first one inward that is not a one-statement wrapper (a lambda, `def step(): return trainer.step()`)."""
    for s in reversed(stack[1:]):
        if not _wrapper(s.file, s.line):
            return s
    return stack[0]


def _hottest_below(ctx: _Context, site: Site) -> str:
    """'hottest: f (file), 40% of it': the user function where most of the time under `site` is spent (the innermost
    user frame of its samples)."""
    funcs: collections.Counter = collections.Counter()
    total = 0
    for st in ctx.obs.sampler.stacks:
        if any(s.line == site.line and s.file == site.file for s in st):
            total += 1
            if st and st[0] != site:
                funcs[f"{st[0].function} ({short_path(st[0].file)})"] += 1
    if not funcs:
        return f"{total} sample(s) at the line, none below it"
    f, n = funcs.most_common(1)[0]
    return f"hottest: {f}, {n / total:.0%} of its {total} samples"


def _memory(ctx: _Context) -> list[Finding]:
    obs = ctx.obs
    if not obs.memory_total or obs.peak_bytes < MEMORY_SHARE * obs.memory_total:
        return []
    fix, study = FIXES[MEMORY]
    return [Finding(MEMORY, None, f"peak {obs.peak_bytes / 2**30:.2f} GiB in one step", None, None,
                    evidence=f"peak_memory: {obs.peak_bytes / obs.memory_total:.0%} of the device's "
                             f"{obs.memory_total / 2**30:.1f} GiB", fix=fix, study=study)]


def _floor(ctx: _Context) -> list[Finding]:
    f = ctx.obs.floor_s
    if not f or ctx.mean < FLOOR_RATIO * f:
        return []
    s = Measured.from_samples(ctx.obs.times)
    share = Measured(1 - f / s.value, max(0.0, 1 - f / s.low) if s.low > 0 else 0.0, 1 - f / s.high)
    fix, study = FIXES[FLOOR]
    return [Finding(FLOOR, None, f"{ctx.mean / f:.3g}x the floor ({fmt_seconds(f)})", None, share,
                    evidence="the step's time against the floor it was given", fix=fix, study=study)]


def _lifetime(ctx: _Context) -> list[Finding]:
    if not ctx.obs.lifetime:
        return []
    message, stack = ctx.obs.lifetime
    stack = ctx.strip(stack)
    fix, study = FIXES[LIFETIME]
    return [Finding(LIFETIME, stack[0] if stack else None, "read of an overwritten CUDA-graph output", None, None,
                    evidence="check_lifetimes(): the step built again and called twice", fix=fix, study=study,
                    stack=stack, detail=message)]


# ---- the source: loops and functions at a line --------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _tree(file: str):
    src = "".join(linecache.getlines(file))
    try:
        return ast.parse(src) if src else None
    except SyntaxError:
        return None


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@functools.lru_cache(maxsize=4096)
def _loop_at(file: str, line: int) -> tuple[int, int, str] | None:
    """The innermost loop of the user's source holding `line` (start, end, its function), or None."""
    tree = _tree(file)
    if tree is None:
        return None
    held = [n for n in ast.walk(tree) if isinstance(n, _LOOPS) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not held:
        return None
    best = max(held, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)))
    return best.lineno, best.end_lineno or best.lineno, _function_at(file, best.lineno)


@functools.lru_cache(maxsize=4096)
def _wrapper(file: str, line: int) -> bool:
    """Whether `line` is in a lambda, or a function whose body (its docstring aside) is one statement."""
    tree = _tree(file)
    if tree is None:
        return False
    held = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not held:
        return False
    fn = max(held, key=lambda n: n.lineno)
    if isinstance(fn, ast.Lambda):
        return True
    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(getattr(b, "value", None), ast.Constant))]
    return len(body) == 1


@functools.lru_cache(maxsize=4096)
def _function_at(file: str, line: int) -> str:
    """The (qualified) name of the function or class holding `line`: 'Solver.step', '<module>' outside any."""
    tree = _tree(file)
    if tree is None:
        return ""
    defs = sorted((n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                   and n.lineno <= line <= (n.end_lineno or n.lineno)), key=lambda n: n.lineno)
    return ".".join(n.name for n in defs) or "<module>"
