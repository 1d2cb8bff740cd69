"""Notebooks 01's and 02's figures on findings of known values: each version in the study's colour, the judged value
written where a figure shows what a claim judges (and the same number the card shows), the legend saying what is
drawn, a share's interval never below 0; and 02's figure without a judged speed claim (a GPU preset's smoke run)."""
import math
import types

import matplotlib
import pytest

from perflab.kit.bench import from_times
from perflab.kit.figures import color
from perflab.kit.verdicts import Decision
from perflab.probe1d import claims, figures, profiles, study
from perflab.probe1d.params import ProfileParams, SlabStatsParams

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close():
    import matplotlib.pyplot as plt
    yield
    plt.close("all")


def _run(cfg, device_type="cpu"):
    return types.SimpleNamespace(cfg=cfg, device=types.SimpleNamespace(type=device_type))


class Profile:
    def __init__(self, shares):
        self.shares = shares

    def share(self, needle):
        return self.shares.get(needle, 0.0)


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + \
        [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_the_share_figure_draws_the_judged_share_its_clipped_interval_and_says_so():
    shares = [(0.80, 0.0), (0.81, 0.02), (0.82, 0.0), (0.81, 0.0), (0.81, 0.01)]
    base = [Profile({"compute_slab_stats": c, "torch.repeat_interleave": r}) for c, r in shares]
    found = profiles.Findings(data=(types.SimpleNamespace(shape=(1024, 256)), types.SimpleNamespace(shape=(1024, 24))),
                              profiles=profiles.Profiles(base, Profile({}), Profile({}), Profile({}), {}))
    fig = figures.share_figure(_run(ProfileParams()), found)
    texts = _texts(fig)
    judged = profiles.share_text(profiles.share_of_fit(base, "compute_slab_stats"))
    assert judged == "81.0% [79.5, 82.5]" and judged in texts                    # the card's number, on the figure
    assert any(t.startswith("0.600% [0, ") for t in texts)                       # clipped at 0, not -0.59%
    legend = " | ".join(texts)
    assert "mean of 5 profiles, 99% interval" in legend and "90%" not in legend and "median" not in legend
    assert "optimized: 0% in every frame" in legend                              # no empty series in the legend
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert {matplotlib.colors.to_hex(p.get_facecolor()) for p in bars} == {color("baseline", study.IMPLS)}
    assert ax.get_xlabel() == "share of Sparse1DProbe.fit, inclusive (%)"
    # a threshold, with its value, only where a claim is judged: the GPU mechanisms' frames are not judged on a CPU
    dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
    assert len(dotted) == 1 and ">= 66.6%" in texts and not any(t.startswith(">= 42") for t in texts)


class Source:
    kind = "generated"

    def get(self, n_rows, n_classes, seed_offset=0):
        x = types.SimpleNamespace(shape=(n_rows, 512), _nnz=lambda: n_rows * 32)
        return x, types.SimpleNamespace(shape=(n_rows, n_classes))


def _row(n_rows, n_classes, sweeps, base_s, opt_s):
    m = {impl: from_times([s * f for f in (0.98, 1.0, 1.03)], label="LM iteration") for impl, s in
         (("baseline", base_s), ("optimized", opt_s))}
    return dict(n_rows=n_rows, n_classes=n_classes, sweeps=sweeps, nnz=n_rows * 32, pair_events=n_rows * 32 * n_classes,
                ratio=base_s / opt_s, low=0.95 * base_s / opt_s, high=1.05 * base_s / opt_s, **m)


def _slab_found(decisions):
    sweep = [_row(1024, 32, ("rows",), 0.0387, 0.00425), _row(4096, 32, ("rows", "classes"), 0.130, 0.00943),
             _row(4096, 8, ("classes",), 0.0316, 0.00486)]
    floor = dict(bandwidth=25.7e9, sigmoid_rate=2.43e9, bound="sigmoid throughput", floor_s=4096 * 32 * 32 / 2.43e9)
    return study.Findings(source=Source(), floor=floor, decisions=decisions, sweep=sweep)


def _d(v, lo, hi, claim):
    return Decision("-", v, lo, hi, 15, 6.0, 0.99, "speedup", **claim.rule)


def test_the_iteration_figure_writes_the_judged_speedup_and_floor_beside_the_sweeps_indicative_ratios():
    decisions = {"cpu_10x": _d(13.6, 12.7, 14.6, claims.SLAB_CLAIMS["cpu_10x"]),
                 "floor_3x": _d(5.47, 5.13, 5.80, claims.FLOOR_CLAIM)}
    fig = figures.iteration_figure(_run(SlabStatsParams()), _slab_found(decisions))
    texts = _texts(fig)
    assert "13.6x [12.7, 14.6]" in texts and "judged: 5.47x [5.13, 5.80] the floor" in texts
    assert "target >= 10x (cpu_10x)" in texts
    assert any("ratio of medians" in t and "indicative" in t for t in texts)
    top, bottom = fig.axes
    handles, labels = top.get_legend_handles_labels()
    drawn = {label: matplotlib.colors.to_hex((h[0] if isinstance(h, tuple) else h).get_color())
             for h, label in zip(handles, labels)}
    assert drawn["baseline, rows grow"] == drawn["baseline, classes grow"] == color("baseline", study.IMPLS)
    assert drawn["optimized, rows grow"] == drawn["optimized, classes grow"] == color("optimized", study.IMPLS)
    assert bottom.get_xlabel() == "(event, class) pairs per LM iteration"
    assert "ms per LM iteration" in top.get_ylabel() and "(x)" in bottom.get_ylabel()
    ticks = bottom.xaxis.get_major_formatter()
    assert [ticks(v, 0) for v in (1e6, 2e6, 5e6, 2e9)] == ["1M", "2M", "5M", "2G"]       # not 10^6
    from perflab.probe1d import benchmarks

    found = _slab_found(decisions)
    widest = max(r[v].iqr / r[v].median for r in found.sweep for v in ("baseline", "optimized"))
    caption = benchmarks.sweep_frame(_run(SlabStatsParams()), found).caption
    assert f"the widest IQR here is {widest:.0%} of its median" in caption   # the host's noise, said on the table


def test_the_iteration_figure_without_a_judged_speed_claim_draws_the_devices_target_and_no_judged_mark():
    gpu = SlabStatsParams(n_latents=256, n_classes=16, l0=16, n_rows=4096, baseline_slabs=1)   # the smoke preset
    found = _slab_found({"floor_3x": _d(5.47, 5.13, 5.80, claims.FLOOR_CLAIM)})
    found.sweep = [_row(4096, 16, ("rows", "classes"), 0.05, 0.001)]
    texts = _texts(figures.iteration_figure(_run(gpu, "cuda"), found))
    assert "target >= 100x (gpu_100x)" in texts
    assert not any(t.startswith("judged at the default size") for t in texts)


def test_the_iteration_figure_draws_an_unbounded_interval_and_prints_it():
    """Under load a few paired rounds can leave Fieller's interval open ([2.1, inf]): drawn to the axis' reach (the
    limits were NaN and the cell failed), printed as it is."""
    decisions = {"cpu_10x": _d(2.8, 2.1, float("inf"), claims.SLAB_CLAIMS["cpu_10x"]),
                 "floor_3x": _d(27.3, 25.4, float("inf"), claims.FLOOR_CLAIM)}
    fig = figures.iteration_figure(_run(SlabStatsParams()), _slab_found(decisions))
    fig.canvas.draw()
    texts = _texts(fig)
    assert "2.80x [2.10, inf]" in texts and "judged: 27.3x [25.4, inf] the floor" in texts
    assert all(math.isfinite(v) for ax in fig.axes for v in ax.get_ylim())
