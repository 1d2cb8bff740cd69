"""The verdict card (perflab.kit.card) and what it reads: a claim's unit and the function that measures it, Evidence,
the numbers in their unit. The card is what a reader sees first: every number on it must be the decided one."""
import dataclasses

import pytest

from perflab.kit.card import VerdictCard, card_html, card_markdown, device_text, untested_line
from perflab.kit.claims import Claim, ClaimError, Claims, Evidence, as_row
from perflab.kit.formatting import value_text, with_unit
from perflab.kit.notebook import open_run
from perflab.kit.results import read_rows
from perflab.kit.verdicts import Decision, Measured


@dataclasses.dataclass
class P:
    batch: int = 16
    verdict_time: float = 1.0


def _claims():
    return Claims(Claim("speed", "recycle at least 3x faster than full", "2-4x", at_least=3, partly=1.05, unit="x",
                        source="seed 001", measured_by="study.decide"),
                  Claim("ideal", "at least 70% of the ideal", ">= 70%", at_least=0.7, unit="%"),
                  Claim("syncs", "no host sync per step", "0", at_most=0, fixed=True),
                  Claim("gpu", "at least 4x on a GPU", ">= 4x", at_least=4, unit="x", setup={"device": "cuda"}),
                  Claim("big", "at batch 64", ">= 1x", at_least=1, unit="x", setup={"batch": 64}), params=P)


def _decision(value, low, high, **rule):
    return Decision("holds", value, low, high, 11, 29.7, 0.99, "speedup", calls=(1, 4), **rule)


def _found():
    return {"speed": Evidence(_decision(3.41, 3.2, 3.64, at_least=3, partly=1.05), "recycle over full"),
            "ideal": Evidence(Measured(0.81, 0.761, 0.864), "81% of the ideal"),
            "syncs": Evidence(Measured.exact(0), "13 -> 0 host syncs per step"),
            "gpu": Evidence(None, "not timed"), "big": Evidence(None, "not timed")}


@pytest.mark.parametrize("x, unit, measured, text", [
    (3, "x", False, "3x"), (0.7, "%", False, "70%"), (0.88, "ms", False, "0.88 ms"), (1.3333, "", False, "1.333"),
    (3.41, "x", True, "3.41x"), (0.81, "%", True, "81.0%"), (2310.0, "GiB", False, "2,310 GiB")])
def test_a_number_in_its_unit(x, unit, measured, text):
    assert with_unit(x, unit, measured) == text


@pytest.mark.parametrize("v, unit, text", [
    ((3.41, 3.2, 3.64), "x", "3.41x [3.20, 3.64]"), ((0.81, 0.761, 0.864), "%", "81.0% [76.1, 86.4]"),
    ((1.69, 1.6, 1.75), "GiB", "1.69 GiB [1.60, 1.75]"), ((0.0, 0.0, 0.0), "", "0"),
    ((0.238, 0.238, 0.238), "%", "23.8%"), ((13.0, 13.0, 13.0), "x", "13x"),
    ((2.0, 1.5, float("inf")), "x", "2.00x [1.50, inf]")])
def test_a_value_and_its_interval_in_the_claims_unit(v, unit, text):
    assert value_text(*v, unit) == text


def test_a_pass_fail_claim_reads_yes_or_no():
    c = Claim("same", "the same curves", "same", at_least=1, unit="bool")
    assert (c.rule_text, with_unit(1.0, "bool"), with_unit(0.0, "bool")) == ("yes", "yes", "no")
    assert (value_text(1.0, 1.0, 1.0, "bool"), value_text(0.0, 0.0, 0.0, "bool")) == ("yes", "no")
    [row] = Claims(c).judge({"same": Evidence(Measured.exact(0.0), "curves differ")})
    assert row.verdict == "does not hold" and "**no** exact" in card_markdown([row])


def test_a_rule_reads_in_the_claims_unit():
    c = _claims()
    assert c["speed"].rule_text == ">= 3x (partly: >= 1.05x)"
    assert c["ideal"].rule_text == ">= 70%"
    assert c["syncs"].rule_text == "<= 0"
    assert Claim("t", "t", "1", at_most=0.88, unit="ms").rule_text == "<= 0.88 ms"


@pytest.mark.parametrize("field, value, message", [
    ("unit", 3, "unit must be a string, got 3"),
    ("measured_by", "study.decide speed", "measured_by names a function from the study's package"),
    ("measured_by", 1, "measured_by must be a string")])
def test_a_claims_unit_and_measurer_are_refused_when_they_cannot_be_read(field, value, message):
    with pytest.raises(ClaimError, match=message):
        Claim("a", "t", "1", at_least=1, **{field: value})


def test_a_claim_names_the_function_that_measures_it_and_a_wrong_name_fails():
    from perflab.template.mystudy import study
    from perflab.template.mystudy.claims import CLAIMS

    assert CLAIMS.measurer("speed") is study.decide_speed and CLAIMS.measurer("syncs") is study.counts
    from perflab.template.mystudy.params import Params

    wrong = Claims(Claim("a", "t", "1", at_least=1, measured_by="study.no_such_function"), params=Params)
    with pytest.raises(ClaimError, match="measured_by 'study.no_such_function' is not a function of "
                                         "perflab.template.mystudy"):
        wrong.measurer("a")
    assert Claims(Claim("a", "t", "1", at_least=1)).measurer("a") is None


def test_every_claim_of_every_study_names_a_function_that_exists():
    """One hop from a claim to its measurement: a claim whose measured_by names nothing fails here."""
    import importlib

    for mod in ("perflab.template.mystudy.claims", "perflab.latentwire.claims"):
        claims = importlib.import_module(mod).CLAIMS
        for c in claims:
            assert c.measured_by, f"{mod}: claim {c.key!r} names no measured_by"
            assert callable(claims.measurer(c.key))


def test_judge_takes_evidence_and_rows_carry_the_unit_and_the_measurer():
    rows = _claims().judge(_found(), cfg=P(), device="cpu")
    speed, ideal, syncs, gpu, big = rows
    assert (speed.verdict, speed.unit, speed.measured_by) == ("holds", "x", "study.decide")
    assert (ideal.verdict, ideal.unit, syncs.verdict) == ("holds", "%", "fixed")
    assert (gpu.verdict, gpu.why, big.why) == ("not tested here", "measured on cpu", "measured at batch=16")
    legacy = _claims().judge({k: tuple(v)[:2] for k, v in _found().items()}, cfg=P(), device="cpu")
    assert [r.verdict for r in legacy] == [r.verdict for r in rows]   # plain (measurement, sentence) tuples too


def test_the_card_shows_the_decided_numbers_in_their_unit_and_folds_the_untested():
    rows = _claims().judge(_found(), cfg=P(), device="cpu")
    md = card_markdown(rows, device="AMD EPYC (cpu)", figure="04/run/strategies.png", title="04")
    lines = md.splitlines()
    speed = next(line for line in lines if line.startswith("| recycle"))
    assert "**3.41x [3.20, 3.64]**" in speed and "against >= 3x (partly: >= 1.05x)" in speed
    assert "99% interval, 11 paired rounds, 29.7 s" in speed and "**holds**" in speed and speed.endswith("| - |")
    assert "(seed 001)" in speed and "| 2-4x |" in speed
    assert "**81.0% [76.1, 86.4]** against >= 70%" in md
    assert "**0** against <= 0 · exact" in md and "**fixed**" in md
    assert not any(line.startswith("| at least 4x") for line in lines)   # the untested: one line, not rows
    assert ("Every claim measured on AMD EPYC (cpu). Not tested here (2): gpu (measured on cpu); big "
            "(measured at batch=16).") in lines   # the device once, not on every row
    assert "- **gpu, big**: here: not timed" in lines   # what was measured instead, folded, one item for both
    assert lines[-1] == "![the main figure](04/run/strategies.png)"
    assert untested_line(rows[:3]) == ""


def test_the_untested_line_folds_each_claims_reason_under_it():
    claims = Claims(Claim("speed", "at least 3x", ">= 3x", at_least=3, unit="x"),
                    Claim("gpu", "at least 4x on a GPU", ">= 4x", at_least=4, unit="x", setup={"device": "cuda"},
                          why_not="a CUDA kernel's claim; a CPU runs another kernel"),
                    Claim("big", "at batch 64", ">= 1x", at_least=1, unit="x", setup={"batch": 64}), params=P)
    rows = claims.judge({"speed": Evidence(_decision(3.41, 3.2, 3.64, at_least=3), "x"),
                         "gpu": Evidence(None, "2.1x indicative"), "big": Evidence(None, "")}, cfg=P(),
                        device="cpu")
    md = card_markdown(rows, device="AMD EPYC (cpu)").splitlines()
    line = next(x for x in md if x.startswith("Every claim"))
    assert "gpu (measured on cpu); big (measured at batch=16)." in line   # what ran, on the line
    assert "- **gpu**: a CUDA kernel's claim; a CPU runs another kernel; here: 2.1x indicative" in md   # why, and
    assert not any(x.startswith("- **big**") for x in md)   # no reason beyond the line's: nothing folded
    assert md.index("<details><summary>why each is not tested here, and what this run measured instead</summary>") \
        > md.index(line)
    html = card_html(rows, device="AMD EPYC (cpu)")
    assert "<details" in html and "<b>gpu</b>: a CUDA kernel&#x27;s claim" in html
    from perflab.kit.card import untested_reasons

    same = [dataclasses.replace(as_row(r), key=k, why_not="a GPU mechanism", measured="")
            for r, k in ((rows[1], "a"), (rows[1], "b"))]
    assert untested_reasons(same) == [("a, b", "a GPU mechanism")]   # one reason, once, for both
    said = dataclasses.replace(same[0], measured="1.00x, not judged; a GPU mechanism, on a CPU")
    assert untested_reasons([said]) == [("a", "here: 1.00x, not judged; a GPU mechanism, on a CPU")]   # not twice
    from perflab.kit.card import card_text
    assert card_text(rows).splitlines()[-1] == "  gpu: a CUDA kernel's claim; a CPU runs another kernel; here: 2.1x indicative"
    assert "<details" not in card_markdown(rows[:1])   # nothing untested: no fold


def test_the_cards_html_has_the_pending_claims_until_judged_and_the_figure_beside():
    claims = _claims()
    pending = card_html([], pending=list(claims))
    assert pending.count(">pending<") == 5 and "recycle at least 3x faster than full" in pending
    rows = claims.judge(_found(), cfg=P(), device="cpu")
    html = card_html(rows, device="AMD EPYC (cpu)", figure_png=b"\x89PNG", caption="the figure")
    assert ">pending<" not in html and "3.41x [3.20, 3.64]" in html and "data:image/png;base64,iVBORw==" in html
    assert html.index("3.41x") < html.index("data:image/png")   # the table, then the figure beside it
    assert "study.decide" in html and "Not tested here (2)" in html


def test_the_card_judges_logs_quietly_and_logs_its_figure(tmp_path, capsys):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    claims = _claims()
    card = VerdictCard(claims)                    # outside a kernel: nothing displayed
    with pytest.raises(RuntimeError, match=r"no run yet: setup\(..., card=card\) attaches it"):
        card.judge(_found())
    run = open_run("04_early_exit", P(), out_dir=str(tmp_path), device="cpu")
    run.device = __import__("torch").device("cpu")
    card.attach(run)
    assert "[pending] recycle at least 3x faster than full" in repr(card)
    fig, _ = plt.subplots()
    card.figure(fig, "strategies", "total time")
    rows = card.judge(_found())
    assert capsys.readouterr().out == ""          # the card shows them: no log printed
    logged = read_rows(tmp_path / "results.jsonl")
    assert [r["claim"] for r in logged if r["kind"] == "claim"] == [r.claim for r in rows]
    assert {r.get("unit") for r in logged if r["kind"] == "claim"} >= {"x", "%"}
    assert [r["card_figure"] for r in logged if r.get("card_figure")] == ["strategies.png"]
    assert (run.dir / "strategies.png").is_file()
    assert "[holds] recycle at least 3x faster than full: 3.41x [3.20, 3.64]" in repr(card)
    assert card.details().loc["speed", "verdict"] == "holds"
    env = run.log.env       # the card's title says what its numbers depend on: the card comes before the setup line
    title = card._repr_html_().split("</div>")[0]
    assert f"torch {env['torch']}" in title and (not env.get("commit") or f"commit {env['commit'][:7]}" in title)


@pytest.mark.parametrize("env, text", [
    ({"torch": "2.13.0+cpu", "commit": "9cf3e19cab36", "dirty": False}, "torch 2.13.0+cpu · commit 9cf3e19"),
    ({"torch": "2.11.0", "commit": "9cf3e19cab36", "dirty": True}, "torch 2.11.0 · commit 9cf3e19 (dirty tree)"),
    ({"torch": "2.11.0", "commit": None}, "torch 2.11.0"), ({}, "")])
def test_the_stamp_a_cards_title_names(env, text):
    from perflab.kit.card import stamp_text

    assert stamp_text(env) == text


def test_a_runs_own_headline_leads_the_card_and_is_the_logged_one(tmp_path):
    """05's headline depends on the device (the CPU's op count, the GPU's captured speed): the card, REPORT.md and the
    README lead with the same row; a headline that is no claim is refused by name."""
    card = VerdictCard(_claims())
    run = open_run("04_early_exit", P(), out_dir=str(tmp_path), device="cpu")
    run.device = __import__("torch").device("cpu")
    card.attach(run)
    with pytest.raises(ValueError, match="headline 'nope' is no claim of this study; claims: speed, ideal"):
        card.judge(_found(), headline="nope")
    card.judge(_found(), headline="syncs")
    first = [line for line in repr(card).splitlines() if line.startswith("[")][0]
    assert first.startswith("[fixed] no host sync per step"), repr(card)
    logged = [r for r in read_rows(tmp_path / "results.jsonl") if r.get("headline")]
    assert [r["key"] for r in logged] == ["syncs"]


@pytest.mark.parametrize("env, text", [
    ({"device_name": "AMD EPYC", "device_kind": "cpu", "torch_threads": 1}, "AMD EPYC (cpu), 1 thread"),
    ({"device_name": "NVIDIA H200", "device_kind": "cuda"}, "NVIDIA H200 (cuda)"),
    ({"device_kind": "cpu", "torch_threads": 2}, "cpu, 2 threads"), ({}, "")])
def test_the_device_a_card_names(env, text):
    assert device_text(env) == text


def test_a_timed_claim_that_misses_names_the_diagnosed_cause_and_others_do_not():
    c = Claims(Claim("speed", "at least 4x", "4-6x", at_least=4, partly=1.05, unit="x"),
               Claim("syncs", "no sync", "0", at_most=0),
               Claim("floor", "within 3x of the floor", "3x", at_most=3, unit="x"))
    d = Decision("partly holds", 3.37, 2.95, 3.82, 20, 8.0, 0.99, "speedup", at_least=4, partly=1.05, calls=(1, 3))
    f = Decision("does not hold", 5.9, 5.5, 6.3, 30, 2.0, 0.99, "times the floor", at_most=3, calls=(1, 29))
    rows = c.judge({"speed": Evidence(d, "s"), "syncs": Evidence(Measured.exact(2.0), "2 syncs"),
                    "floor": Evidence(f, "the optimized iteration over the floor")})
    cause = "31 ops per step at 4.0 us each, launch-bound"
    md = card_markdown(rows, cause=cause)
    assert f"**partly holds: {cause} (perflab diagnose)**" in md
    assert md.count("**does not hold**") == 2   # a count, and the optimized version's own bound: not the baseline's cause
    assert f"{cause} (perflab diagnose)" in card_html(rows, cause=cause)
    assert card_markdown(rows).count("perflab diagnose") == 0


def test_the_details_show_every_sentence_whole():
    """pandas cuts a cell at 50 characters in a notebook (display.max_colwidth): the card's details are sentences."""
    long = "x" * 60 + " the end of a sentence"
    card = VerdictCard(Claims(Claim("speed", "2x faster", ">= 2x", at_least=2.0)))
    card.rows = [as_row({"key": "speed", "claim": "2x faster", "verdict": "holds", "measured": long, "why": "",
                         "value": 3.0, "low": 2.5, "high": 3.5})]
    d = card.details()
    assert long in d._repr_html_() and long in repr(d) and d.loc["speed", "measured here"] == long


def test_the_details_are_folded_under_a_title_in_a_notebook():
    card = VerdictCard(Claims(Claim("speed", "2x faster", ">= 2x", at_least=2.0)))
    card.rows = [as_row({"key": "speed", "claim": "2x faster", "verdict": "holds", "measured": "3x", "why": "",
                         "value": 3.0, "low": 2.5, "high": 3.5})]
    page = card.details()._repr_html_()
    assert page.startswith("<details><summary>Each claim in full (1)") and page.endswith("</details>")
    assert card.details().copy().fold == card.details().fold    # kept through pandas' copies (_metadata)


def test_the_headline_comes_first_then_what_misses_then_what_holds():
    from perflab.kit.card import card_text, ordered

    rows = [as_row({"key": k, "claim": k, "verdict": v, "measured": "-", "why": ""})
            for k, v in (("a", "holds"), ("b", "within noise"), ("c", "does not hold"), ("head", "holds"),
                         ("d", "fixed"), ("e", "partly holds"))]
    assert [r.key for r in ordered(rows, "head")] == ["head", "c", "e", "b", "a", "d"]
    assert [r.key for r in ordered(rows)] == ["c", "e", "b", "a", "head", "d"]
    html_keys = [k for k in ("head", "c", "e", "b", "a", "d")]
    page = card_html(rows, headline="head")
    assert [page.index(f">{k}<") for k in html_keys] == sorted(page.index(f">{k}<") for k in html_keys)
    assert card_text(rows, headline="head").splitlines()[0].endswith("head: - ()") or \
        card_text(rows, headline="head").splitlines()[0].startswith("[holds] head")
    md = card_markdown(rows, headline="head")
    assert md.index("| head") < md.index("| c ") < md.index("| a ")


def test_a_verdict_within_noise_says_what_would_decide_it():
    from perflab.kit.card import verdict_cell, what_would_decide

    note = ("the budget (2 s) ended after 88 rounds; about 6.8 s more of rounds would decide it at this spread (the "
            "value 35% from the threshold)")
    r = as_row({"key": "s", "claim": "s", "verdict": "within noise", "measured": "-", "why": "", "note": note})
    assert what_would_decide(r) == "about 6.8 s more of rounds would decide it at this spread (the value 35% from " \
                                   "the threshold)"
    assert verdict_cell(r) == "within noise: " + what_would_decide(r)
    assert what_would_decide(r) in card_html([r]) and what_would_decide(r) in card_markdown([r])
    held = as_row({**{"key": "s", "claim": "s", "measured": "-", "why": "", "note": note}, "verdict": "holds"})
    assert what_would_decide(held) == "" and verdict_cell(held) == "holds"
    none = as_row({"key": "s", "claim": "s", "verdict": "within noise", "measured": "-", "why": "",
                   "note": "no budget would decide it: the value is 2% from the threshold"})
    assert what_would_decide(none).startswith("no budget would decide it")


def test_a_wide_card_figure_goes_under_the_table_at_its_own_size():
    # 03's two-panel figure (1222 px) was shrunk to 62% beside the table, its text ~5 px (grading, 2026-12-03)
    import struct

    from perflab.kit.card import WIDE, png_width

    def png(w, h=300):
        return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", w, h) + b"\x08\x02\x00\x00\x00"

    assert png_width(png(1222)) == 1222 and png_width(b"GIF89a" + bytes(20)) == 0
    rows = _claims().judge(_found(), cfg=P(), device="cpu")
    wide, narrow = card_html(rows, figure_png=png(1222)), card_html(rows, figure_png=png(WIDE - 40))
    assert "flex: 1 1 100%; max-width: 1222px" in wide
    assert "flex: 1 1 640px; max-width: 720px" in narrow and "flex: 1 1 100%" not in narrow
