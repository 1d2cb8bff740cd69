"""05's claim glue (issue 48's planted bugs): what `study.decide_savings(run, found)` decides is seconds saved per
seed's epoch of `epoch_batches` batches, not per timed epoch nor per batch. test_vae_evidence.py checks the `per`
each call is given; here the decision's value itself, from epochs whose cost is known: a stand-in `decide_saving`
that does what the kit's does (the difference of one call of each side, times `per`), trainers whose epoch over the
timed batches returns its cost (each configuration's time per step, vae_injected.TIMES_MS, times the batches)."""
import pytest
from vae_injected import TIMES_MS, findings, run

from perflab.kit.verdicts import Decision
from perflab.vae import study
from perflab.vae.claims import SAVINGS


class _Trainer:
    def __init__(self, name):
        self.name = name

    def epoch(self, batches, **kw):
        return len(batches) * TIMES_MS[self.name] * 1e-3      # seconds of one call: an epoch over the timed batches


def test_each_saving_is_seconds_saved_per_seeds_epoch_of_epoch_batches_batches(monkeypatch):
    monkeypatch.setattr(study, "trainer", lambda v, **kw: _Trainer(v.name))

    def decide_saving(b, a, *, per, max_run_time, device, **rule):
        saved = (b() - a()) * per
        return Decision("", saved, saved, saved, 1, 0.1, 0.99, "saving", **rule)
    monkeypatch.setattr(study, "decide_saving", decide_saving)
    f = findings("cuda")
    f.inputs.timed_batches = [None] * 8                     # 8 timed batches; the seed's epoch is 5,000
    r = run("cuda", epoch_batches=5000, log_every=8)
    got = study.decide_savings(r, f)
    assert set(got) == set(SAVINGS)
    logged = {k["claim"]: (a, k["unit"]) for kind, a, k in r.log.rows if kind == "value"}
    for key, (before, after) in SAVINGS.items():            # (10 ms - 9 ms a step) x 5,000 steps: 5 s for the remap
        saved = (TIMES_MS[before] - TIMES_MS[after]) * 1e-3 * 5000
        assert got[key].value == pytest.approx(saved), key
        assert logged[key] == (("seconds saved per 5000-batch epoch (paired rounds)", got[key].value), "s"), key
