"""perflab.kit.versions: a study's versions (one lookup, one error), a variant (a version with its knobs) and a grid of
variants x sizes (a table, a figure, a log row per timing with what it was measured at)."""
import matplotlib
import pytest

from perflab.kit.results import ResultsLog
from perflab.kit.versions import Grid, Part, Variant, VersionError, Versions

matplotlib.use("Agg")


def slow(x, scale=1):
    return sum(range(x * scale))


def fast(x, scale=1):
    return x * scale


def test_the_baseline_is_first_and_flagged():
    v = Versions({"fast": fast, "slow": slow}, baseline="slow")
    assert list(v) == ["slow", "fast"] and v.baseline == "slow" and v.others == ["fast"]
    assert Versions({"a": slow, "b": fast}).baseline == "a"


def test_an_unknown_name_is_refused_with_the_names_there_are():
    v = Versions({"baseline": slow, "optimized": fast})
    with pytest.raises(VersionError) as e:
        v["optimised"]
    assert str(e.value) == "no version 'optimised': expected one of baseline, optimized"
    assert isinstance(e.value, KeyError) and isinstance(e.value, ValueError)  # a lookup, and a bad parameter
    assert v.get("optimised") is None and "optimised" not in v
    with pytest.raises(VersionError, match=r"sweep: 'x', 'y' are not one of baseline, optimized"):
        v.check(["baseline", "x", "y"], "sweep")
    assert v.check(("optimized",)) == ["optimized"]
    with pytest.raises(VersionError, match="no search 'z'"):
        Versions({"a": slow}, what="search")["z"]


@pytest.mark.parametrize("versions, baseline, message", [
    ({}, None, "at least one version"), ({"a": 3}, None, "'a' must be a non-empty name of a callable"),
    ({"": slow}, None, "non-empty name"), ({"a": slow}, "b", "the baseline 'b' is not one of a")])
def test_bad_versions_are_refused(versions, baseline, message):
    with pytest.raises(ValueError, match=message):
        Versions(versions, baseline=baseline)


def test_a_variant_calls_its_version_with_its_knobs():
    v = Versions({"slow": slow, "fast": fast})
    tripled = v.variant("fast", scale=3)
    assert tripled(5) == 15 and tripled(5, scale=2) == 10  # a keyword at the call wins
    assert (tripled.version, tripled.name, tripled.knobs) == ("fast", "fast (scale=3)", {"scale": 3})
    assert v.variant("fast").name == "fast" and v.variant("fast", "quick", scale=2).name == "quick"
    assert tripled.with_knobs(scale=4)(1) == 4 and tripled.with_knobs(scale=4).name == "fast (scale=4)"
    assert [x.name for x in v.variants(scale=2)] == ["slow (scale=2)", "fast (scale=2)"]
    assert [x.version for x in v.variants(["fast"])] == ["fast"]
    with pytest.raises(VersionError, match="no version 'medium'"):
        v.variant("medium")
    assert len({tripled, v.variant("fast", scale=3)}) == 1 and tripled == Variant("fast", fast, {"scale": 3})


def test_a_grid_times_each_variant_at_each_size_and_logs_where(tmp_path):
    v = Versions({"slow": slow, "fast": fast})
    made = []

    def inputs(n):
        made.append(n)
        return n

    grid = Grid(v.variants(), sizes=[4, 64, 4], size_name="length", label="sum",
                inputs=inputs, call=lambda variant, n: lambda: variant(n))
    times = grid.measure(rounds=2, min_run_time=0.002, max_run_time=0.004)
    assert made == [4, 64] and times.sizes == [4, 64]  # each size's inputs once, a repeated size once
    assert set(times.times) == {(name, n) for name in ("slow", "fast") for n in (4, 64)}
    assert times["slow", 64].task_spec.sub_label == "length=64" and times["fast", 4].task_spec.description == "fast"
    text = str(times.table(title="grid"))
    assert text.startswith("[ grid ]") and text.count("sum") == 4
    log = ResultsLog(tmp_path / "results.jsonl", study="t")
    times.log(log, metric="time per call", note="x")
    rows = [(r["impl"], r["variant"], r["length"], r["metric"], r["note"]) for r in log.rows(kind="measurement")]
    assert sorted(rows) == sorted((i, i, n, "time per call", "x") for i in ("slow", "fast") for n in (4, 64))
    fig = times.figure(title="t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["slow", "fast"]
    assert ax.get_xlabel() == "length" and ax.get_xscale() == "log" and ax.get_title() == "t"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "64"]   # the sizes, not 2^2 and 2^6


def test_a_grid_refuses_variants_it_could_not_tell_apart():
    v = Versions({"slow": slow, "fast": fast})
    with pytest.raises(ValueError, match="different names"):
        Grid([v.variant("fast"), v.variant("fast")], sizes=[1], inputs=int, call=lambda a, b: b)
    with pytest.raises(ValueError, match="at least one k"):
        Grid(v.variants(), sizes=[], size_name="k", inputs=int, call=lambda a, b: b)
    # a size logged as "n" would collide with the blocks timed, a field of every timing's row
    with pytest.raises(ValueError, match="size_name 'n' is a field of every timing's log row .*'n_size'"):
        Grid(v.variants(), sizes=[1], size_name="n", inputs=int, call=lambda a, b: b)


def test_a_grid_scales_a_part_of_the_work_to_the_whole_call_and_keeps_its_blocks(monkeypatch):
    # "slow" timed on a quarter of its work: the table, the figure and the log read a whole call (4x the part); the
    # timer (bench.measure, under measure_interleaved, which scales a Part) is replaced by one that calls the callable
    # once and reads fixed blocks (2 calls each), so the scaling is checked exactly, not against another timing
    import perflab.kit.bench as bench
    from perflab.kit.bench import from_times

    def timer(fn, *, label, sub_label, description, **timing):
        fn()
        return from_times([0.2, 0.4], label=label, sub_label=sub_label, description=description, calls=2)
    monkeypatch.setattr(bench, "measure", timer)
    v = Versions({"slow": slow, "fast": fast})
    ran = []

    def call(variant, n):
        if variant.version == "slow":
            return Part(lambda: ran.append(slow(n)), scale=4)
        return lambda: variant(n)

    times = Grid(v.variants(), sizes=[64], inputs=lambda n: n, call=call).measure(rounds=1)
    assert ran == [slow(64)]                                      # the part is what ran
    assert times["slow", 64].times == pytest.approx([0.4, 0.8])   # 0.1 and 0.2 s per call, x4
    assert times["fast", 64].times == pytest.approx([0.1, 0.2])   # a whole call: as timed
    # its two blocks kept (measure_interleaved merges rounds into per-call times: calls per block are scaled() 's test)
    assert len(times["slow", 64].times) == 2 and times["slow", 64].task_spec.sub_label == "size=64"
    with pytest.raises(ValueError, match="finite scale > 0"):
        Part(lambda: None, scale=0)


def test_scaled_multiplies_each_call_not_each_block():
    from perflab.kit.bench import from_times, scaled

    m = from_times([0.4, 0.8], label="l", sub_label="s", description="d", calls=4)   # blocks of 4 calls
    s = scaled(m, 3.0)
    assert s.times == pytest.approx([0.3, 0.6]) and s.number_per_run == 4            # per call: 0.1 x 3, 0.2 x 3
    assert (s.task_spec.label, s.task_spec.sub_label, s.task_spec.description) == ("l", "s", "d")
    assert scaled(m, 1.0) is m
    with pytest.raises(ValueError, match="factor must be a finite number > 0"):
        scaled(m, float("nan"))
