"""Realistic planted bugs (issue 48): each as a developer would write it, in the code between the modules that
mutmut's token flips do not reach, with the test that kills it. `mutation/plant.py` plants each in a scratch copy of
the checkout and runs its named tests, then the fast tier, then the slow tier of its folder.

A bug is (name, area, file, old, new, why, kills, folder): `old` must occur exactly once in `file` (plant.py refuses
one that no longer applies: update the bug with the code); `kills` are the tests written for it (pytest node ids);
`folder` is the tests/ folder whose slow tier it is run against when the fast tier misses it."""
from __future__ import annotations

from typing import NamedTuple


class Bug(NamedTuple):
    name: str
    area: str
    file: str
    old: str
    new: str
    why: str
    kills: tuple[str, ...]
    folder: str


AREAS = ("runner report/compare", "params/presets", "intervals", "decision budget", "loaders", "template",
         "claim glue")

PLANTED = (
    # ---- the runner's report and compare ---------------------------------------------------------------------
    Bug("report-first-judged", "runner report/compare", "src/perflab/kit/results.py",
        '        if any(r["kind"] == "claim" for r in rs):\n            out[(study, point)] = (rid, rs)',
        '        if any(r["kind"] == "claim" for r in rs):\n            out.setdefault((study, point), (rid, rs))',
        "the latest judged execution taken as the first one met (as if executions came newest first): after two "
        "judged runs and a failed one, REPORT.md and compare show the older verdicts",
        ("tests/runner/test_report.py::test_after_two_judged_runs_and_a_failed_one_the_report_shows_the_last_judged_one_never_an_older",
         "tests/runner/test_compare.py::test_after_two_judged_runs_and_a_failed_one_compare_shows_the_last_judged_one"),
        "tests/runner"),
    Bug("compare-range-same-percentiles", "runner report/compare", "src/perflab/runner/compare.py",
        'lo, hi = rb["p20_s"] / ra["p80_s"], rb["p80_s"] / ra["p20_s"]',
        'lo, hi = rb["p20_s"] / ra["p20_s"], rb["p80_s"] / ra["p80_s"]',
        "compare's B/A range pairs like percentiles (B p20 / A p20 .. B p80 / A p80): narrower than the conservative "
        "range, and equal to it wherever p20 = p80, as in every fixture before",
        ("tests/runner/test_compare.py::test_compare_prints_the_conservative_range_of_b_over_a_from_real_spreads",),
        "tests/runner"),
    # ---- the parameters and presets -------------------------------------------------------------------------
    Bug("preset-wins-over-p", "params/presets", "src/perflab/runner/catalog.py",
        "    params: dict[str, Any] = {}\n    if preset:\n        f = preset_file(preset, name, p_dir, path.parent)\n"
        "        if f is not None:\n            params.update(load_preset_file(f))\n    params.update(overrides or {})",
        "    params: dict[str, Any] = dict(overrides or {})\n    if preset:\n"
        "        f = preset_file(preset, name, p_dir, path.parent)\n        if f is not None:\n"
        "            params.update(load_preset_file(f))",
        "the preset read after the -p overrides: `--params gpu -p batch=8` runs (and records) the preset's batch",
        ("tests/runner/test_cli.py::test_p_wins_over_the_preset_on_the_same_key",
         "tests/runner/test_cli.py::test_what_a_run_records_is_what_its_notebook_ran_with_a_preset_and_p"),
        "tests/runner"),
    Bug("one-value-list-is-a-scalar", "params/presets", "src/perflab/kit/params.py",
        '            return [parse_value(item.strip()) for item in text.split(",") if item.strip()]',
        '            if "," not in text:\n                return parse_value(text)\n'
        '            return [parse_value(item.strip()) for item in text.split(",") if item.strip()]',
        "a list parameter given one value parsed as that value (`-p slab_sweep=8` -> 8, not [8]): refused by the "
        "dataclass or, in a sweep, one point per digit",
        ("tests/runner/test_cli.py::test_a_list_parameter_given_one_value_is_a_one_element_list",),
        "tests/kit"),
    # ---- the decision engine: intervals, budget -----------------------------------------------------------------
    Bug("fieller-over-rounds", "intervals", "src/perflab/kit/intervals.py",
        "g = widen * t_quantile(1 - alpha / 2, m - 1) ** 2 / m",
        "g = widen * t_quantile(1 - alpha / 2, m - 1) ** 2 / n",
        "Fieller's g divided by the rounds, not the batches: the interval narrower by sqrt(rounds / batches) wherever "
        "the rounds are correlated (batch means ignored); identical on independent rounds",
        ("tests/kit/test_intervals.py::test_fieller_covers_a_ratio_of_means_at_its_stated_level_under_autocorrelated_rounds",),
        "tests/kit"),
    Bug("mean-interval-over-rounds", "intervals", "src/perflab/kit/intervals.py",
        "    half = t_quantile(1 - alpha / 2, k - 1) * math.sqrt(widen * var / k)",
        "    half = t_quantile(1 - alpha / 2, k - 1) * math.sqrt(widen * var / n)",
        "the mean's half-width over the rounds, not the batches (as the ratio's above)",
        ("tests/kit/test_intervals.py::test_the_mean_interval_covers_the_mean_of_independent_and_autocorrelated_rounds",),
        "tests/kit"),
    Bug("budget-after-warm-up", "decision budget", "src/perflab/kit/deciding.py",
        "    run.notes.append(warm)\n    looks = _Looks(rule=rule, confidence=confidence, clock=sw.clock, "
        "deadline=started + budget,\n",
        "    run.notes.append(warm)\n    looks = _Looks(rule=rule, confidence=confidence, clock=sw.clock, "
        "deadline=sw.clock() + budget,\n",
        "the budget counted from the end of the warm-up (\"the budget is for the rounds\"): a decision takes up to "
        "1.25x max_run_time",
        ("tests/kit/test_decide.py::test_the_budget_is_wall_time_and_a_call_longer_than_it_says_so",
         "tests/kit/test_decide.py::test_a_clear_effect_is_decided_at_the_first_look_and_a_threshold_one_runs_the_budget"),
        "tests/kit"),
    # ---- the loaders -------------------------------------------------------------------------------------------
    Bug("kg-last-line-dropped", "loaders", "src/perflab/prover/core/kg.py",
        '    return lines[:-1] if lines[-1] == "" else lines',
        "    return lines[:-1]  # the empty string after the last newline",
        "every file assumed to end in a newline: a split file without one loses its last triple silently",
        ("tests/prover/test_prover_core_datasets.py::test_every_triple_is_read_whatever_the_line_ends_blank_lines_or_bom",
         "tests/prover/test_prover_core_kg.py::test_the_text_format_reads_every_fact_whatever_the_line_ends_blank_lines_or_bom"),
        "tests/prover"),
    Bug("bom-kept", "loaders", "src/perflab/prover/core/kg.py",
        '    lines = _NEWLINE.split(text.removeprefix("\\ufeff"))',
        "    lines = _NEWLINE.split(text)",
        "a Windows editor's byte-order mark kept: the first head of train.txt becomes '\\ufeffann', another entity, "
        "and a text-format file's first fact is refused",
        ("tests/prover/test_prover_core_datasets.py::test_every_triple_is_read_whatever_the_line_ends_blank_lines_or_bom",
         "tests/prover/test_prover_core_kg.py::test_the_text_format_reads_every_fact_whatever_the_line_ends_blank_lines_or_bom"),
        "tests/prover"),
    Bug("squad-bom-refused", "loaders", "src/perflab/latentwire/data.py",
        '        text = raw.decode("utf-8-sig")',
        '        text = raw.decode("utf-8")',
        "a SQuAD file with a byte-order mark refused as not JSON",
        ("tests/latentwire/test_latentwire_data.py::test_the_squad_loader_reads_a_file_from_windows_or_without_its_final_newline",),
        "tests/latentwire"),
    Bug("family-test-holds-valid", "loaders", "src/perflab/prover/core/data.py",
        '"test": held[n_train + n_valid:]}',
        '"test": held[n_train:]}',
        "the family graph's test split written as 'the rest after train': it holds valid's triples too (a leak)",
        ("tests/prover/test_prover_core_kg.py::test_the_family_graphs_splits_are_disjoint_and_with_the_facts_are_the_whole_closure",),
        "tests/prover"),
    # ---- the template --------------------------------------------------------------------------------------------
    Bug("template-converged-at-once", "template", "src/perflab/template/mystudy/optimized.py",
        "        moved = (new - c).norm()\n        c = new\n",
        "        c = new\n        moved = (new - c).norm()\n",
        "the convergence test reads the step after the centroids were replaced: always 0, so a user's copy stops "
        "after one iteration (the template's blobs settle in one, so its old test passed)",
        ("tests/runner/test_new_study.py::test_the_studys_early_stop_is_tested_on_data_that_needs_many_iterations",),
        "tests/runner"),
    # ---- each study's claim glue (tests/*/test_*_glue.py, beside the injected-findings tests of the typed findings)
    Bug("02-floor-factor-inverted", "claim glue", "src/perflab/probe1d/study.py",
        'scale=1 / per_call, quantity="times the floor"',
        'scale=per_call, quantity="times the floor"',
        "02: the floor kernel's factor applied the wrong way round: 'times the floor' off by per_call squared",
        ("tests/probe1d/test_probe1d_glue.py::test_the_floor_claim_reads_the_iterations_time_over_the_floors",),
        "tests/probe1d"),
    Bug("03-floor-without-steps", "claim glue", "src/perflab/prover/evaluation/study.py",
        "scale=per_step * best.batch * best.steps / copy_bytes)",
        "scale=per_step * best.batch / copy_bytes)",
        "03: the floor's bytes of a chunk counted for one step, not for every step it ran: the share of the floor "
        "reads steps times too small",
        ("tests/prover/test_evaluation_glue.py::test_the_floors_share_is_the_steps_bytes_over_the_bandwidth_over_the_best_chunks_time",),
        "tests/prover"),
    Bug("04-ideal-divided", "claim glue", "src/perflab/prover/early_exit/study.py",
        "ideal = Measured(d.value * share, d.low * share, d.high * share)",
        "ideal = Measured(d.value / share, d.low / share, d.high / share)",
        "04: recycle's share of the ideal divided by the useful share instead of multiplied (the ideal's speedup is 1 / "
        "share): 81% reads 134%",
        ("tests/prover/test_early_exit_glue.py::test_the_ideals_share_is_recycle_over_full_times_the_useful_share",
         "tests/prover/test_prover_early_exit_claims.py::test_every_claim_is_decided_at_the_injected_value_in_its_unit"),
        "tests/prover"),
    Bug("05-saving-per-batch", "claim glue", "src/perflab/vae/study.py",
        "per=cfg.epoch_batches / len(i.timed_batches), cfg=cfg, device=run.device)",
        "per=cfg.epoch_batches, cfg=cfg, device=run.device)",
        "05: a saving per timed epoch scaled by the seed's batches per epoch, as if per batch: len(batches) times too "
        "large (10x on the CPU defaults, 50x on the GPU preset)",
        ("tests/vae/test_vae_glue.py::test_each_saving_is_seconds_saved_per_seeds_epoch_of_epoch_batches_batches",
         "tests/vae/test_vae_evidence.py::test_the_savings_are_decided_per_epoch_of_the_runs_steps"),
        "tests/vae"),
    Bug("06-gain-scale-inverted", "claim glue", "src/perflab/latentwire/study.py",
        'scale = results[v].samples_per_step / results["baseline"].samples_per_step',
        'scale = results["baseline"].samples_per_step / results[v].samples_per_step',
        "06: a gain's samples-per-step scale inverted: the batch-size and all-together gains read per step the wrong "
        "way round (3.37x reads 0.05x); invisible at scale 1, where the CPU's timed gains are",
        ("tests/latentwire/test_latentwire_glue.py::test_each_gain_is_decided_per_sample_the_variants_samples_per_step_over_the_baselines",
         "tests/latentwire/test_latentwire_evidence.py::test_each_variant_is_decided_once_against_the_baseline_and_every_claim_on_it_judged_on_that"),
        "tests/latentwire"),
)
