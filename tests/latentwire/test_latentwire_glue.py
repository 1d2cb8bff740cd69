"""06's claim glue (issue 48's planted bugs): what `study.decide_gains` hands each gain claim's decision, on a
variant whose samples per step differ from the baseline's (the tests elsewhere time variants at scale 1, where an
inverted scale reads the same). Written against today's `study.decide_gains`; the refactor of each study's evidence
into typed findings will move it."""
import types

from perflab.kit.claims import Claim
from perflab.latentwire import claims, study
from perflab.latentwire.params import LatentWireParams


class _Trainer:
    def __init__(self, name):
        self.name, self.paused = name, 0

    def step(self):
        return self.name

    def pause(self):
        self.paused += 1


def test_each_gain_is_decided_per_sample_the_variants_samples_per_step_over_the_baselines(monkeypatch):
    """A variant taking 16 samples a step against the baseline's 4 is 4x the work per step: its speedup per sample is
    4x its speedup per step (scale = variant / baseline samples per step: 06's 3.37x headline read 0.05x the other
    way round). Every gain claim of the ablation's variants is decided, on its setup or not."""
    monkeypatch.setattr(Claim, "off_setup", lambda self, cfg=None, device_type="": "")
    calls = {}

    def decide_speedup(base, opt, *, scale, **kw):
        calls[opt()] = (base(), scale, kw["max_run_time"])
        return types.SimpleNamespace(scale=scale)
    monkeypatch.setattr(study, "decide_speedup", decide_speedup)
    gains = [k for k, how in claims.MEASURED_BY.items() if how == "gain"]
    variants = {claims.VARIANTS[k] for k in gains}
    per_step = {"baseline": 4, **{v: 4 * (2 + i) for i, v in enumerate(sorted(variants))}}
    trainers = {v: _Trainer(v) for v in per_step}
    results = {v: types.SimpleNamespace(samples_per_step=n) for v, n in per_step.items()}
    cfg = LatentWireParams(verdict_time=0.7)
    out = study.decide_gains(trainers, results, cfg=cfg, device="cpu")
    assert set(out) == set(gains)
    for key in gains:
        v = claims.VARIANTS[key]
        assert out[key].scale == per_step[v] / 4, key
        assert calls[v] == ("baseline", per_step[v] / 4, 0.7)
        assert trainers[v].paused >= 1                      # its DataLoader workers stopped after its rounds
    missing = sorted(variants)[0]                           # a variant the ablation did not run: not decided
    trainers.pop(missing)
    again = study.decide_gains(trainers, results, cfg=cfg, device="cpu")
    assert all((again[k] is None) == (claims.VARIANTS[k] == missing) for k in gains)
