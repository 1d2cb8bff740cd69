"""Count what torch.compile does inside a block: frames compiled, recompiles, graphs, CUDA-graph recordings.

    with count_compiles() as cc:
        for b in batches:
            step(b)
    assert cc.recompiles == 0

Counts come from dynamo's own compile callbacks (each compile carries an id "frame/attempt": an
attempt above 0 is a recompile of a frame already compiled) and from its `unique_graphs` counter;
CUDA-graph recordings (mode="reduce-overhead") come from the same callbacks' CUDAGRAPH_RECORDING trigger.

`count_compiles(details=True)` also keeps, per compile, what a diagnosis needs (`.events`, `CompileEvent`): the user's
stack when it began (`perflab.kit.frames`: the line that called the compiled function, or for a graph break's resume
function the line of the break), its seconds, the code object compiled, and dynamo's own recompile reason ("tensor 'x'
size mismatch at index 0. expected 64, actual 37": `torch._dynamo.utils.get_compilation_metrics()`); and every graph
break dynamo logs (`.graph_breaks`, `GraphBreak`: the user's file and line and the reason, read from dynamo's
"graph_breaks" log, which it writes for a block only: its logger is turned on and captured there, and left as it was).

`same_draws_options()`: inductor options under which a compiled graph draws the same random numbers as eager.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import re
import sys
import time

import torch
import torch._dynamo  # noqa: F401  (registers the callback handler)
from torch._dynamo.callback import CallbackTrigger, callback_handler
from torch._dynamo.utils import counters
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from .cudagraphs import note_reset
from .frames import Site, user_stack


@dataclasses.dataclass
class CompileEvent:
    """One compile (`count_compiles(details=True)`): which, where it began, how long, why."""
    compile_id: str
    recompile: bool
    stack: tuple = ()                 # the user's frames when it began, innermost first (perflab.kit.frames)
    seconds: float = 0.0
    code: Site | None = None          # the code object dynamo compiled (its file, first line, name)
    reason: str | None = None         # dynamo's recompile reason (the guard that failed)
    cudagraph: bool = False           # a CUDA-graph recording, not a dynamo compile


@dataclasses.dataclass
class GraphBreak:
    """A graph break as dynamo logs it: the user's file and line, and the reason (its first line; `.detail`: all)."""
    site: Site
    reason: str
    detail: str = ""


_BREAK = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*\n\s*Graph Break Reason: (?P<reason>.*)", re.S)


class _BreakLog(logging.Handler):
    """Dynamo's "graph_breaks" artifact log, captured for a block (its loggers on at DEBUG, not propagated)."""

    def __init__(self, into: list):
        super().__init__(logging.DEBUG)
        self.into = into
        self.loggers = [logging.getLogger(q) for q in _artifact_loggers("graph_breaks")]
        self.saved = []

    def emit(self, record) -> None:
        m = _BREAK.search(record.getMessage())
        if m:
            text = m["reason"].strip()
            self.into.append(GraphBreak(Site(m["file"], int(m["line"]), ""), _reason(text), text))

    def __enter__(self):
        for lg in self.loggers:
            self.saved.append((lg, lg.level, lg.propagate))
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
            lg.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        for lg, level, propagate in self.saved:
            lg.removeHandler(self)
            lg.setLevel(level)
            lg.propagate = propagate
        self.saved = []


def _reason(text: str) -> str:
    """A graph break's reason in one line: its kind and dynamo's explanation ("Failed to trace builtin operator:
    Dynamo does not know how to trace builtin operator `print` ..."), not the generic "Encountered graph break when
    attempting to trace CALL" that heads a break inside a call."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Encountered graph break when attempting")] or lines
    kind = lines[0] if lines else ""
    why = next((ln.removeprefix("Explanation:").strip() for ln in lines if ln.startswith("Explanation:")), "")
    return f"{kind}: {why}" if why and why != kind else kind


def _artifact_loggers(artifact: str) -> list[str]:
    from torch._logging._internal import log_registry

    return sorted(q for q in log_registry.artifact_log_qnames if q.endswith(f".__{artifact}"))


@dataclasses.dataclass
class CompileCounter:
    compiles: int = 0            # frames compiled by dynamo (first compiles and recompiles)
    recompiles: int = 0          # compiles of a frame that was already compiled (new shape, dtype, guard failure)
    graphs: int = 0              # FX graphs produced (a graph break makes several per frame)
    cudagraph_recordings: int = 0  # CUDA graphs recorded (reduce-overhead); 0 on CPU
    compile_ids: list = dataclasses.field(default_factory=list)
    details: bool = False        # keep `.events` and `.graph_breaks` (module doc)
    events: list = dataclasses.field(default_factory=list)        # CompileEvent per compile (details)
    graph_breaks: list = dataclasses.field(default_factory=list)  # GraphBreak per break logged (details)

    def _on_start(self, args) -> None:
        trig = args.callback_trigger
        if trig == CallbackTrigger.DYNAMO:
            self.compiles += 1
            self.compile_ids.append(args.compile_id)
            if _attempt(args.compile_id) > 0:
                self.recompiles += 1
        elif trig == CallbackTrigger.CUDAGRAPH_RECORDING:
            self.cudagraph_recordings += 1
        if self.details and trig in (CallbackTrigger.DYNAMO, CallbackTrigger.CUDAGRAPH_RECORDING):
            self.events.append(CompileEvent(str(args.compile_id), _attempt(args.compile_id) > 0,
                                            user_stack(sys._getframe(1)),
                                            cudagraph=trig == CallbackTrigger.CUDAGRAPH_RECORDING))
            self._started = time.perf_counter()

    def _on_end(self, args) -> None:
        if self.events and self._started is not None:
            self.events[-1].seconds = time.perf_counter() - self._started
            self._started = None

    def __enter__(self) -> CompileCounter:
        self._graphs0 = counters["stats"]["unique_graphs"]
        callback_handler.register_start_callback(self._on_start)
        if self.details:
            self._started = None
            callback_handler.register_end_callback(self._on_end)
            self._breaks = _BreakLog(self.graph_breaks).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        callback_handler.remove_start_callback(self._on_start)
        self.graphs = counters["stats"]["unique_graphs"] - self._graphs0
        if self.details:
            callback_handler.remove_end_callback(self._on_end)
            self._breaks.__exit__(*exc)
            _add_metrics(self.events)

    def reasons(self) -> collections.Counter:
        """{dynamo's recompile reason: recompiles} (details)."""
        return collections.Counter(e.reason or "(no reason recorded)" for e in self.events if e.recompile)

    def as_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("compile_ids", "details", "events", "graph_breaks")}


def _add_metrics(events: list) -> None:
    """Each compile's code object and recompile reason, from dynamo's record of its last compiles."""
    try:
        from torch._dynamo.utils import get_compilation_metrics
        metrics = {str(m.compile_id): m for m in get_compilation_metrics()}
    except (ImportError, AttributeError):   # not this torch's: the events keep what the callbacks saw
        return
    for e in events:
        m = metrics.get(e.compile_id)
        if m is None:
            continue
        if getattr(m, "co_filename", None):
            e.code = Site(m.co_filename, int(m.co_firstlineno or 0), m.co_name or "")
        reason = getattr(m, "recompile_reason", None)
        if reason:   # "0/0: tensor 'x' size mismatch ...": the guard of the earlier compile it failed
            e.reason = reason.split(": ", 1)[1] if re.match(r"^\[?\d+/\d+\]?: ", reason) else reason


def _attempt(compile_id: str) -> int:
    # "3/1" -> 1 ; "[3/1]" -> 1 ; "3/1_2" (restart after graph break) -> 1
    core = str(compile_id).strip("[]").split("/")
    if len(core) < 2:
        return 0
    digits = "".join(ch for ch in core[1].split("_")[0] if ch.isdigit())
    return int(digits) if digits else 0


def count_compiles(details: bool = False) -> CompileCounter:
    """Context manager: compiles, recompiles, graphs and CUDA-graph recordings inside the block; `details` also keeps
    each compile's line, time and reason, and the graph breaks (module doc)."""
    return CompileCounter(details=details)


def reset() -> None:
    """Forget every compiled graph (torch._dynamo.reset), so the next call compiles from scratch. CUDA-graph
    generations start again from every compiled call, as on a GPU (`perflab.kit.cudagraphs`)."""
    torch._dynamo.reset()
    note_reset()


def allow_recompiles(n: int = 64) -> None:
    """Let dynamo compile up to `n` variants of one function (its default, 8, is shared by every caller of that code
    object): past the limit it silently runs the function eagerly for the rest of the process. Called where a
    study compiles, not at import; it only ever raises the limit."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, n)


def compile_kwargs(compile: str, backend: str = "inductor") -> dict | None:
    """`torch.compile` keywords for a study's `compile` (the mode; "off": None, run eager) and `backend`
    parameters (see `perflab.kit.params.CompileMode`). Call sites stay explicit:
    `torch.compile(step, fullgraph=True, **kw)`. Only inductor takes a mode (the others ignore it, noisily)."""
    if compile == "off":
        return None
    return {"backend": backend, "mode": compile} if backend == "inductor" else {"backend": backend}


def same_draws_options() -> dict:
    """Inductor options (`torch.compile(..., options=)`) under which a compiled graph draws the same random numbers
    as eager from the same seed: aten's own RNG ops (`fallback_random`), called in the program's order.

    torch >= 2.13 keeps that order itself: a post-grad pass chains the draws (PyTorch PR #181245) and the locality
    reorder leaves them in place (PR #176842). torch 2.11 (the floor pyproject.toml accepts; the GPU host's) has
    neither: its scheduler treats a draw as a pure op and runs it wherever its inputs are ready, e.g. a `randn`
    ahead of the dropouts before it (2.11 also decomposes `randn_like(t)` into `randn(t.shape)`: the same numbers
    from the same generator, under another profiler name). On such a torch the same chain is added here as a
    custom post-grad pass, and the locality reorder, which runs before that pass, is turned off."""
    from torch._inductor.fx_passes import post_grad

    if hasattr(post_grad, "_chain_random_ops_for_ordering"):  # this inductor chains the draws itself
        return {"fallback_random": True}
    return {"fallback_random": True, "reorder_for_locality": False, "post_grad_custom_post_pass": _ChainDraws()}


class _ChainDraws(CustomGraphPass):
    """Each random op of the graph (aten's `nondeterministic_seeded` tag) runs after the one before it in program
    order: a control dependency (`preserve_node_ordering`, torch's own helper for ordering), as torch 2.13 adds."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        import operator

        from torch._inductor.fx_passes.control_dependencies import preserve_node_ordering
        from torch.utils._ordered_set import OrderedSet

        draws = [n for n in graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
                 and torch.Tag.nondeterministic_seeded in n.target.tags]
        deps = {}
        for before, node in zip(draws, draws[1:]):
            # a draw with a tuple output (native_dropout): 2.11's lowering of the dependency skips a tuple, so
            # depend on one of its items, computed by the same kernel
            item = next((u for u in before.users if u.target is operator.getitem), before)
            deps[node] = OrderedSet([item])
        preserve_node_ordering(graph, deps)

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))  # inductor's cache key: this file's code
