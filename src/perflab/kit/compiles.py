"""Count what torch.compile does inside a block: frames compiled, recompiles, graphs, CUDA-graph recordings.

    with count_compiles() as cc:
        for b in batches:
            step(b)
    assert cc.recompiles == 0

Counts come from dynamo's own compile callbacks (each compile carries an id "frame/attempt": an
attempt above 0 is a recompile of a frame already compiled) and from its `unique_graphs` counter;
CUDA-graph recordings (mode="reduce-overhead") come from the same callbacks' CUDAGRAPH_RECORDING trigger.

`same_draws_options()`: inductor options under which a compiled graph draws the same random numbers as eager.
"""
from __future__ import annotations

import dataclasses

import torch
import torch._dynamo  # noqa: F401  (registers the callback handler)
from torch._dynamo.callback import CallbackTrigger, callback_handler
from torch._dynamo.utils import counters
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from .cudagraphs import note_reset


@dataclasses.dataclass
class CompileCounter:
    compiles: int = 0            # frames compiled by dynamo (first compiles and recompiles)
    recompiles: int = 0          # compiles of a frame that was already compiled (new shape, dtype, guard failure)
    graphs: int = 0              # FX graphs produced (a graph break makes several per frame)
    cudagraph_recordings: int = 0  # CUDA graphs recorded (reduce-overhead); 0 on CPU
    compile_ids: list = dataclasses.field(default_factory=list)

    def _on_start(self, args) -> None:
        trig = args.callback_trigger
        if trig == CallbackTrigger.DYNAMO:
            self.compiles += 1
            self.compile_ids.append(args.compile_id)
            if _attempt(args.compile_id) > 0:
                self.recompiles += 1
        elif trig == CallbackTrigger.CUDAGRAPH_RECORDING:
            self.cudagraph_recordings += 1

    def __enter__(self) -> CompileCounter:
        self._graphs0 = counters["stats"]["unique_graphs"]
        callback_handler.register_start_callback(self._on_start)
        return self

    def __exit__(self, *exc) -> None:
        callback_handler.remove_start_callback(self._on_start)
        self.graphs = counters["stats"]["unique_graphs"] - self._graphs0

    def as_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "compile_ids"}


def _attempt(compile_id: str) -> int:
    # "3/1" -> 1 ; "[3/1]" -> 1 ; "3/1_2" (restart after graph break) -> 1
    core = str(compile_id).strip("[]").split("/")
    if len(core) < 2:
        return 0
    digits = "".join(ch for ch in core[1].split("_")[0] if ch.isdigit())
    return int(digits) if digits else 0


def count_compiles() -> CompileCounter:
    """Context manager: compiles, recompiles, graphs and CUDA-graph recordings inside the block."""
    return CompileCounter()


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
