"""03's oracle: the engine library's reference prover (`core.reference`: SLD resolution in plain Python, and the
exhaustive breadth-first provability over the tensor engine's successors), which the checks hold the engine to."""
from ..core.reference import Limits, ReferenceProver, prove_exhaustive, to_tuples

__all__ = ["Limits", "ReferenceProver", "prove_exhaustive", "to_tuples"]
