"""Study 4's oracle: the seed's own loop (`baseline.rollout`), whose steps, outcome and score every other version
must give every candidate (`checks.disagreements`), and on the ladder the designed proof lengths
(`core.data.seed_like_lengths`), which its steps must equal. Both rest on the engine the reference prover checks
(`core.reference`, re-exported here). Recycle's schedule (steps, and busy slots each step) must also be the simple one
`recycle_schedule` writes out: its claimed speedup rests on those counts."""
from ..core.reference import Limits, ReferenceProver, prove_exhaustive

__all__ = ["Limits", "ReferenceProver", "prove_exhaustive", "recycle_schedule"]


def recycle_schedule(lengths: list[int], batch: int) -> list[int]:
    """Continuous batching, written plainly: each of `batch` slots holds a candidate until its proof's last step and
    in that step takes the next one in queue order (which starts in the step after). -> busy slots per step (its
    length: the steps; its sum: the useful slot-steps)."""
    queue, busy = list(lengths), []
    slots = [queue.pop(0) if queue else 0 for _ in range(batch)]  # steps left per slot; 0: idle
    while any(slots):
        busy.append(sum(left > 0 for left in slots))
        slots = [left - 1 if left > 1 else (queue.pop(0) if left == 1 and queue else 0) for left in slots]
    return busy
