"""The `perflab` command, bottom to top (each imports the kit, the studies and the modules before it):

    execute         one notebook through papermill, and how it ended (ok, failed at a cell, interrupted)
    schemas         which parameter dataclass a notebook validates against (read from its code)
    catalog         the study notebooks: find, inspect, plan, run a set, refresh
    new             `perflab new NAME`: a study of your own from perflab/template/
    sweep_dir       a sweep's folder on disk: its request and its points' states
    slurm           what Slurm says about a sweep's jobs
    sweep           `perflab sweep`: a grid of executions through submitit, resumable
    report_rows     what the reports read off an execution's rows: how it ended, when it started
    report_claims   a claim row as the reports show it: its verdict and judged cells, the claims figure
    sweep_figures   a sweep's figures, one per swept parameter: timings, and claims against thresholds
    report          `perflab report`: a run folder's results as Markdown
    compare         `perflab compare A B`
    pages           `perflab pages`: README's headlines and docs/results.md's evidence, from a recorded refresh
    battery         claims of known truth: a verdict rule's error rate on this machine
    simulate        a simulated machine for the verdicts' rare errors (`perflab battery --simulate`)
    deadline        `perflab gpu-check`'s deadline (a hard stop for everything) and each part's outcome (window.jsonl)
    estimate        a notebook's and a GPU test part's seconds on a GPU, counted from the code, and their limits
    gpu_tests       `pytest -m gpu` in parts: each part's log, an earlier pass at this commit, REPORT.md's lead
    gpucheck        `perflab gpu-check`: the GPU tests, then the notebooks step, one folder of evidence (and its
                    compile caches); the preset of the card it finds
    diagnose        `perflab diagnose`: a step's target resolved, diagnosed by the kit, its table, JSON and figure
    reports         diagnose against the four seed reports: each study's steps, the reports' findings found or not
    cli             the argument parser: each command parses, then calls one function above

A lent GPU window's tooling for a copy of the tree (what travels and comes back, the compile caches packed, the wheels,
the calls' estimate) is not the package's: tools/gpuwindow/, beside tools/gpu-session.sh.
"""
