"""Study 4's oracle: the seed's own loop (`baseline.rollout`), whose steps, outcome and score every other version
must give every candidate (`checks.disagreements`), and on the ladder the designed proof lengths
(`core.data.seed_like_lengths`), which its steps must equal. Both rest on the engine the reference prover checks
(`core.reference`, re-exported here)."""
from ..core.reference import Limits, ReferenceProver, prove_exhaustive

__all__ = ["Limits", "ReferenceProver", "prove_exhaustive"]
