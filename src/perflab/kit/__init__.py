"""The measuring kit: what a study's code and a notebook import (never the runner, never a study).

    bench       measure(), summary(), compare(), memory_bandwidth(), matmul_peak()
    verdicts    decide_speedup/saving/time/value/rate -> Decision: total time at steady state, an interval, the looks
    judge       Measured, judge() (the one rule), Decision
    deciding    how a decision is made: warm-up, paired rounds, batch means, looks, the checks, the budget
    rounds      Stopwatch (a block's own time), warm_up(), size_blocks(), PairedTimer, BlockTimer
    intervals   mean_interval(), ratio_interval() (batch means, Fieller), median_interval(), trend(), with_drift()
    claims      Claim, Claims (a study's claims as data, checked at import), Evidence, Check, report_checks, claims_figure
    card        VerdictCard: a notebook's verdicts at its top, filled in as it runs; card_markdown for the reports
    figures     color(), colors(): one colour per version in every figure of a study
    versions    Versions (a study's versions, the baseline flagged), Variant (a version with its knobs), Grid
    syncs       count_host_syncs(), assert_no_host_syncs()
    launches    count_launches()   (kernels on CUDA; dispatched aten ops on CPU)
    compiles    count_compiles(), compile_kwargs(), allow_recompiles()
    memory      peak_memory(), device_memory()
    cudagraphs  uses_cudagraphs(), tracked(), check_lifetimes(): CUDA-graph output lifetimes, seen on any device
    env         pick_device(), fingerprint(), synchronize()
    results     ResultsLog (the run's results.jsonl)
    profiling   profile()
    diagnosing  diagnose(step) -> Diagnosis: why a step is slow, each cause at the user's line (`perflab.kit.diagnose`)
    diagnosis   Diagnosis, Finding, cause_line(): what diagnose found, shown as a table, a figure, JSON
    causes      the rules from what the counters saw to findings;  frames  the user's line;  sampling  time by line
    params      RunParams, validate(), parse_assignment(), load_preset(): the one validator
    paths       the repository, its notebooks and presets, a run's folder
    formatting  numbers as reports print them
    notebook    setup(name, globals(), Params): every notebook's first cell; open_run(), Run
"""


def __getattr__(name: str):
    """`perflab.kit.diagnose` (and `Diagnosis`, `cause_line`) without importing torch at `import perflab.kit`."""
    if name == "diagnose":
        from .diagnosing import diagnose
        return diagnose
    if name in ("Diagnosis", "Finding", "cause_line"):
        from . import diagnosis
        return getattr(diagnosis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
