"""Which parameter dataclass each study notebook validates against (imported lazily: a study's
subpackage is only imported when its schema is asked for). Each study keeps its notebooks' schemas
in its own `params.py`."""
from __future__ import annotations

import importlib
from pathlib import Path

SCHEMAS = {
    "01_profile_probe1d": "perflab.probe1d.params:ProfileParams",
    "02_slab_stats": "perflab.probe1d.params:SlabStatsParams",
    "03_eval": "perflab.prover.params:EvalParams",
    "04_early_exit": "perflab.prover.params:EarlyExitParams",
    "05_vae_sync": "perflab.vae.params:VAEParams",
    "06_latentwire_amp": "perflab.latentwire.params:LatentWireParams",
}


def schema(notebook: str) -> type:
    """The parameter dataclass of a study notebook (by name, e.g. '03_eval')."""
    if notebook not in SCHEMAS:
        raise KeyError(f"no schema registered for notebook {notebook!r}; known: {', '.join(SCHEMAS)}")
    module, _, cls = SCHEMAS[notebook].partition(":")
    return getattr(importlib.import_module(module), cls)


def schema_for(notebook: str, path: Path) -> type:
    """The registered dataclass of a study notebook; for any other notebook (yours, a test fixture), a
    schema built from its parameters cell. Either way `perflab.params.validate` checks against it."""
    if notebook in SCHEMAS:
        return schema(notebook)
    import papermill  # read the cell here: perflab.notebooks sits above this registry and imports it

    from .params import schema_from_cell

    return schema_from_cell(notebook, papermill.inspect_notebook(str(path)))
