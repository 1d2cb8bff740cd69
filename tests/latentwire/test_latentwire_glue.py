"""06's claim glue (issue 48's planted bugs): what `study.decide_gains(run, results, trainers)` hands each gain
claim's decision, on variants whose samples per step all differ from the baseline's (the CPU ablation times most
variants at scale 1, where an inverted scale reads the same). test_latentwire_evidence.py checks the same scale on
the injected findings; here every variant's scale is distinct, the budget and the stopped workers are checked, and a
variant the ablation did not run is not decided."""
import types

import torch

from perflab.kit.claims import Claim
from perflab.kit.verdicts import Decision
from perflab.latentwire import study
from perflab.latentwire.ablation import TESTED_BY
from perflab.latentwire.findings import GAINS
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

    def decide_speedup(base, opt, *, scale, max_run_time, device, **rule):
        calls[opt()] = (base(), scale, max_run_time)
        return Decision("", scale, scale, scale, 1, 0.1, 0.99, "speedup", **rule)   # its value: the scale it got
    monkeypatch.setattr(study, "decide_speedup", decide_speedup)
    variants = sorted({TESTED_BY[k] for k in GAINS})
    per_step = {"baseline": 4, **{v: 4 * (2 + i) for i, v in enumerate(variants)}}
    trainers = {v: _Trainer(v) for v in per_step}
    results = {v: types.SimpleNamespace(samples_per_step=n) for v, n in per_step.items()}
    run = types.SimpleNamespace(cfg=LatentWireParams(verdict_time=0.7), device=torch.device("cpu"))
    out = study.decide_gains(run, results, trainers)
    assert set(out) == set(GAINS)
    for key in GAINS:
        v = TESTED_BY[key]
        assert out[key].value == per_step[v] / 4, key
        assert calls[v] == ("baseline", per_step[v] / 4, 0.7)
        assert trainers[v].paused >= 1                      # its DataLoader workers stopped after its rounds
    missing = variants[0]                                   # a variant the ablation did not run: not decided
    trainers.pop(missing)
    again = study.decide_gains(run, results, trainers)
    assert all((again[k] is None) == (TESTED_BY[k] == missing) for k in GAINS)
