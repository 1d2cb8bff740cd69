"""`perflab compare A B`: each side's environment as far as it is known, and each study's claims side by side (verdicts
with their reasons, judged intervals, one figure per study with --out), from each side's latest judged execution."""
import dataclasses

from perflab.kit.claims import Claim, Claims, log_rows
from perflab.kit.results import ResultsLog
from perflab.kit.verdicts import Measured
from perflab.runner.cli import main
from perflab.runner.compare import compare, load, load_claims, to_markdown


@dataclasses.dataclass
class P:
    batch: int = 64


CLAIMS = Claims(Claim("speed", "2x faster", ">= 2x", at_least=2.0),
                Claim("big", "3x faster at batch 64", ">= 3x", at_least=3.0, setup={"batch": 64}), params=P)


def _judged(folder, run_id, speed: Measured, batch: int, device: str = "Some CPU"):
    log = ResultsLog(folder / "results.jsonl", study="s", run_id=run_id,
                     stamp={"device_name": device, "torch": "2.13", "commit": "abc"})
    rows = CLAIMS.judge({"speed": (speed, f"{speed.value}x"), "big": (Measured(3.5, 3.2, 3.9), "3.5x")},
                        cfg=P(batch=batch), device="cpu")
    log_rows(log, rows)
    log.value("peak memory", 100.0, unit="MiB")
    return log


def test_the_device_line_says_what_is_known_never_none(tmp_path):
    a = ResultsLog(tmp_path / "a.jsonl", study="s", stamp={"host": "h", "torch": "2.13", "commit": "abc123"})
    a.append("run", status="started")  # the runner's status rows know no device
    a.value("answer", 1.0)
    b = ResultsLog(tmp_path / "b.jsonl", study="s", stamp={"device_name": "NVIDIA H100", "commit": None})
    b.value("answer", 2.0)
    ra, rb = load(tmp_path / "a.jsonl"), load(tmp_path / "b.jsonl")
    md = to_markdown(compare(ra, rb), ra, rb, "a", "b")
    assert "None" not in md
    assert "- A: torch 2.13, commit abc123\n" in md and "- B: NVIDIA H100\n" in md


def test_claims_side_by_side_from_each_sides_latest_judged_execution(tmp_path, capsys):
    _judged(tmp_path / "a", "ra", Measured(2.4, 2.3, 2.5), batch=64)
    _judged(tmp_path / "b", "rb1", Measured(1.9, 1.7, 2.2), batch=16, device="NVIDIA H100")
    failed = ResultsLog(tmp_path / "b" / "results.jsonl", study="s", run_id="rb2", stamp={})  # then a failed run
    failed.append("run", status="started")
    failed.append("run", status="failed", seconds=1.0, cell=3, cells=9, error="RuntimeError: no CUDA device")
    claims = load_claims(tmp_path / "a"), load_claims(tmp_path / "b")
    assert claims[1]["s"].run_id == "rb1" and claims[1]["s"].earlier and not claims[0]["s"].earlier
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    md = (out / "COMPARE.md").read_text()
    assert "## s: claims" in md
    assert "A: run ra; B: run rb1 (an earlier execution: the latest judged no claims)" in md
    assert ("| 2x faster | >= 2x | **holds**: 2.40 [2.30, 2.50] against >= 2 "
            "| **within noise**: 1.90 [1.70, 2.20] against >= 2 |") in md
    assert "| **not tested here** (measured at batch=16): 3.50 [3.20, 3.90] against >= 3 |" in md
    assert "![claims of s: A and B](claims-s.png)" in md
    assert (out / "claims-s.png").read_bytes()[:4] == b"\x89PNG"
    assert "## s: claims" in capsys.readouterr().out  # printed too


def test_after_two_judged_runs_and_a_failed_one_compare_shows_the_last_judged_one(tmp_path):
    """Issue 48: B judged twice ("does not hold", then "holds"), then failed: B's column is the second run's."""
    _judged(tmp_path / "a", "ra", Measured(2.4, 2.3, 2.5), batch=64)
    _judged(tmp_path / "b", "rb1", Measured(1.5, 1.4, 1.6), batch=64)
    _judged(tmp_path / "b", "rb2", Measured(2.6, 2.5, 2.7), batch=64)
    failed = ResultsLog(tmp_path / "b" / "results.jsonl", study="s", run_id="rb3", stamp={})
    failed.append("run", status="started")
    failed.append("run", status="failed", seconds=1.0, cell=3, cells=9, error="RuntimeError: no CUDA device")
    claims = load_claims(tmp_path / "b")
    assert claims["s"].run_id == "rb2" and claims["s"].earlier
    assert [r.verdict for r in claims["s"].rows] == ["holds", "holds"]
    md = to_markdown(compare(load(tmp_path / "a"), load(tmp_path / "b")), load(tmp_path / "a"), load(tmp_path / "b"),
                     "a", "b", claims=(load_claims(tmp_path / "a"), claims))
    assert "A: run ra; B: run rb2 (an earlier execution: the latest judged no claims)" in md
    assert ("| 2x faster | >= 2x | **holds**: 2.40 [2.30, 2.50] against >= 2 "
            "| **holds**: 2.60 [2.50, 2.70] against >= 2 |") in md
    assert "rb1" not in md and "does not hold" not in md and "1.50" not in md


def _timed(folder, median, p20, p80, n=5):
    log = ResultsLog(folder / "results.jsonl", study="s", params={"batch": 64}, stamp={"device_name": "Some CPU"})
    log.append("measurement", metric="step", label="step", sub_label="B=64", impl="optimized", median_s=median,
               iqr_s=(p80 - p20) / 2, p20_s=p20, p80_s=p80, n=n)


def test_compare_prints_the_conservative_range_of_b_over_a_from_real_spreads(tmp_path):
    """p20 != p80 on both sides (the fixtures elsewhere hold them equal, where any pairing of them reads the same):
    the range is B p20 / A p80 to B p80 / A p20, and 'within spread' exactly when it holds 1."""
    _timed(tmp_path / "a", 0.040, 0.036, 0.050)
    _timed(tmp_path / "b", 0.020, 0.018, 0.030)
    _timed(tmp_path / "c", 0.045, 0.030, 0.060)
    a, b, c = (load(tmp_path / x) for x in "abc")
    md = to_markdown(compare(a, b), a, b, "a", "b")
    # 0.018 / 0.050 = 0.36, 0.030 / 0.036 = 0.833; the ratio of medians 0.5
    assert "| step / B=64 / optimized | 40.0 ms | 20.0 ms | 0.500 | 0.360-0.833 |" in md
    md = to_markdown(compare(a, c), a, c, "a", "c")
    # 0.030 / 0.050 = 0.6, 0.060 / 0.036 = 1.67: holds 1
    assert "| step / B=64 / optimized | 40.0 ms | 45.0 ms | 1.12 | 0.600-1.67 (within spread) |" in md


def test_an_old_log_without_claim_keys_pairs_by_the_claims_text(tmp_path):
    _judged(tmp_path / "a", "ra", Measured(2.4, 2.3, 2.5), batch=64)
    old = ResultsLog(tmp_path / "b" / "results.jsonl", study="s", run_id="rb", stamp={"device_name": "NVIDIA H100"})
    old.append("claim", claim="2x faster", seed="2x", measured="1.5x", verdict="does not hold")  # before perflab.kit.claims: no key
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    md = (out / "COMPARE.md").read_text()
    assert "| 2x faster | >= 2x | **holds**: 2.40 [2.30, 2.50] against >= 2 | **does not hold** |" in md
    assert "| 3x faster at batch 64 | >= 3x | **holds**: 3.50 [3.20, 3.90] against >= 3 | - |" in md
