"""IMPLS: the study's three versions, `train_epoch` of baseline.py, optimized.py and captured.py (one signature), as a
kit `Versions` (the baseline first): the one place that names them. Its own module, below params.py (whose check
refuses a `sweep_impls` that names another) and study.py (which uses it)."""
from __future__ import annotations

from ..kit.versions import Versions
from . import baseline, captured, optimized

IMPLS = Versions({"baseline": baseline.train_epoch, "optimized": optimized.train_epoch,
                  "captured": captured.train_epoch})
