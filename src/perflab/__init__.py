"""perflab: a Jupyter-notebook research workbench for PyTorch performance studies.

The house, bottom to top (each layer imports only those below it: tests/project/test_imports.py):
    perflab.kit       the measuring kit, all a study or a notebook imports: timing and verdicts (bench, verdicts,
                      claims), counters (syncs, launches, compiles, memory, cudagraphs), the run's stamps and log
                      (env, results, paths, profiling), parameters (params) and a notebook's first cell (notebook)
    perflab.probe1d, perflab.prover, perflab.vae, perflab.latentwire
                      the studies, each with the same rooms: params, data, reference, baseline, optimized (the
                      baseline's signature; the study's IMPLS names them), checks, claims, study
    perflab.runner    the `perflab` command: execute and catalog notebooks, new studies, sweeps on Slurm, reports,
                      compare, the verdict battery, gpu-check; cli on top
perflab/template/ is the study `perflab new NAME` writes (it imports the kit from outside, as your studies do).
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.2.0"

# perflab 0.1 kept the kit at the top level: a study that `perflab new` wrote then imports `perflab.bench`,
# `perflab.run` and (its tests) `perflab.notebooks`. Those names stay importable, as the same module objects, until
# REMOVED_IN; importing one warns once, naming its new name.
REMOVED_IN = "perflab 0.4"
OLD_NAMES = {f"perflab.{m}": f"perflab.kit.{m}" for m in (
    "bench", "verdicts", "claims", "syncs", "launches", "compiles", "memory", "cudagraphs", "env", "results",
    "profiling", "formatting", "params", "paths")}
OLD_NAMES.update({"perflab.run": "perflab.kit.notebook", "perflab.notebooks": "perflab.runner.catalog"})


class _OldName(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name and hands back the module under its new one (imported once, one module object)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in OLD_NAMES else None

    def create_module(self, spec):
        # A FutureWarning, not a DeprecationWarning: Python hides a DeprecationWarning unless the importing line is
        # in __main__ (a notebook cell), and a 0.1 study imports most old names from its own package (study.py,
        # params.py, claims.py): its author, the one who must change the line, would never see it. A FutureWarning
        # shows in the notebook, under `perflab run` and in pytest alike. Once per name and process: the module
        # then sits in sys.modules under the old name, and this finder is not asked again. stacklevel=2 skips
        # importlib's own frames, so the warning points at the user's import line.
        new = OLD_NAMES[spec.name]
        warnings.warn(f"{spec.name} is perflab 0.1's name for {new}: import {new} instead "
                      f"({REMOVED_IN} removes {spec.name})", FutureWarning, stacklevel=2)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # import sets module.__spec__ to this spec: exec_module puts it back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _OldName) for f in sys.meta_path):
    sys.meta_path.append(_OldName())
