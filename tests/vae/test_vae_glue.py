"""05's claim glue (issue 48's planted bugs): what `study.decide_timed` hands each saving and speed claim's decision:
a call is one epoch over the timed batches, and a saving is scaled to the seed's epoch of `epoch_batches` batches
(`per`), not read per timed epoch nor per batch. Written against today's `study.decide_timed`, trainers and decisions
stood in for; the refactor of each study's evidence into typed findings will move it."""
import types

from perflab.kit.claims import Claim
from perflab.vae import study
from perflab.vae.claims import SAVINGS, SPEEDUPS
from perflab.vae.params import VAEParams


def test_each_saving_is_scaled_to_the_seeds_epoch_and_each_speedup_times_whole_epochs(monkeypatch):
    monkeypatch.setattr(Claim, "off_setup", lambda self, cfg=None, device_type="": "")   # every claim on its setup
    epochs = []

    class Trainer:
        def __init__(self, name):
            self.name = name

        def epoch(self, batches, **kw):
            epochs.append((self.name, len(batches)))
    monkeypatch.setattr(study, "trainer", lambda v, **kw: Trainer(v))
    got = {}

    def saving(b, o, *, per, **kw):
        b(), o()                                     # one call of each side: one epoch over the timed batches
        return types.SimpleNamespace(per=per, kind="saving")

    def speedup(b, o, **kw):
        b(), o()
        return types.SimpleNamespace(scale=kw.get("scale", 1.0), kind="speedup")
    monkeypatch.setattr(study, "decide_saving", saving)
    monkeypatch.setattr(study, "decide_speedup", speedup)
    impls = {name: name for pair in SAVINGS.values() for name in pair} | {n: n for n in SPEEDUPS.values()}
    batches = [object()] * 8                          # 8 timed batches; the seed's epoch is 5,000
    got = study.decide_timed(impls, batches, cfg=VAEParams(epoch_batches=5000), progress_file=None, model_cfg=None,
                             train_cfg=None, seed=0, device="cpu", captured=types.SimpleNamespace(
                                 epoch=lambda batches, **kw: epochs.append(("captured", len(batches)))))
    assert set(got) == set(SAVINGS) | set(SPEEDUPS)
    for key in SAVINGS:
        assert got[key].kind == "saving" and got[key].per == 5000 / 8, key      # 625 timed epochs make the seed's
    for key in SPEEDUPS:
        assert got[key].kind == "speedup" and got[key].scale == 1.0, key       # epoch against epoch
    assert {n for n, _ in epochs} == set(impls) and all(k == 8 for _, k in epochs)
