"""The measuring kit: what a study's code and a notebook import (never the runner, never a study).

    bench       BlockTimer, PairedTimer, measure(), summary(), compare(), memory_bandwidth(), matmul_peak()
    verdicts    decide_speedup/saving/time/value -> Decision: paired rounds, an interval, sequential stopping
    claims      Claim, Claims (a study's claims as data, checked at import), Check, report_checks, claims_figure
    syncs       count_host_syncs(), assert_no_host_syncs()
    launches    count_launches()   (kernels on CUDA; dispatched aten ops on CPU)
    compiles    count_compiles(), compile_kwargs(), allow_recompiles()
    memory      peak_memory(), device_memory()
    cudagraphs  uses_cudagraphs(), tracked(), check_lifetimes(): CUDA-graph output lifetimes, seen on any device
    env         pick_device(), fingerprint(), synchronize()
    results     ResultsLog (the run's results.jsonl)
    profiling   profile()
    params      RunParams, validate(), parse_assignment(), load_preset(): the one validator
    paths       the repository, its notebooks and presets, a run's folder
    formatting  numbers as reports print them
    notebook    setup(name, globals(), Params): every notebook's first cell; open_run(), Run
"""
