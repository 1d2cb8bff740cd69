"""Which parameter dataclass each study notebook validates against (imported lazily: a study's
subpackage is only imported when its schema is asked for)."""
from __future__ import annotations

import importlib

SCHEMAS = {
    "01_profile_probe1d": "perflab.probe1d.params:ProfileParams",
    "02_slab_stats": "perflab.probe1d.params:SlabStatsParams",
    "03_eval": "perflab.prover.config:EvalParams",
    "04_early_exit": "perflab.prover.config:EarlyExitParams",
    "05_vae_sync": "perflab.vae.config:VAEParams",
    "06_latentwire_amp": "perflab.latentwire.config:LatentWireParams",
}


def schema(notebook: str) -> type:
    """The parameter dataclass of a study notebook (by name, e.g. '03_eval')."""
    if notebook not in SCHEMAS:
        raise KeyError(f"no schema registered for notebook {notebook!r}; known: {', '.join(SCHEMAS)}")
    module, _, cls = SCHEMAS[notebook].partition(":")
    return getattr(importlib.import_module(module), cls)
