"""Activation memory: the peak bytes of tensors autograd keeps for backward inside a block.

    with saved_activations(model) as act:
        trainer.step()
    act.peak_bytes

`perflab.kit.memory.peak_memory` gives the device's peak: the CUDA allocator's on a GPU, but on a CPU the
process's RSS high-water mark, which only grows over a notebook (the allocator keeps what it got), so
variants run one after another in one process cannot be compared by it. This counter sees exactly what
the report's memory claims are about (graphs kept alive by summed losses, activations dropped by
checkpointing), the same on every device: each saved tensor's storage is counted from the forward that
saves it until autograd frees it; storages are counted once (views share them); parameters (the frozen
LM's weights included) are not activations and are skipped. Not counted: checkpointed regions' inputs,
temporaries that are never saved, gradients and optimizer state.
"""
from __future__ import annotations

import torch
from torch import nn


class _Held:
    __slots__ = ("owner", "key", "tensor")

    def __init__(self, owner: SavedActivations, key: int, tensor: torch.Tensor):
        self.owner, self.key, self.tensor = owner, key, tensor

    def __del__(self):
        self.owner._release(self.key)


class SavedActivations:
    def __init__(self, model: nn.Module | None = None):
        self._params = {p.untyped_storage().data_ptr() for p in model.parameters()} if model is not None else set()
        self._live: dict[int, list[int]] = {}  # storage pointer -> [holders, bytes]
        self.live_bytes = 0
        self.peak_bytes = 0
        self.saved = 0  # tensors saved (with repeats)

    def _pack(self, t: torch.Tensor):
        if isinstance(t, nn.Parameter):
            return t
        key = t.untyped_storage().data_ptr()
        if key in self._params:
            return t  # a view of a weight (e.g. the tied head's W.t())
        self.saved += 1
        entry = self._live.get(key)
        if entry is None:
            nbytes = t.untyped_storage().nbytes()
            self._live[key] = [1, nbytes]
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        else:
            entry[0] += 1
        return _Held(self, key, t)

    @staticmethod
    def _unpack(h):
        return h.tensor if isinstance(h, _Held) else h

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.live_bytes -= entry[1]
            del self._live[key]

    def __enter__(self) -> SavedActivations:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    def __repr__(self) -> str:
        return f"SavedActivations(peak {self.peak_bytes / 2**20:.2f} MiB, {self.saved} saved tensors)"


def saved_activations(model: nn.Module | None = None) -> SavedActivations:
    """Context manager: peak bytes of activations held for backward in the block (see module doc)."""
    return SavedActivations(model)
