"""perflab: a Jupyter-notebook research workbench for PyTorch performance studies.

The measuring kit (import what you need):
    perflab.bench       measure(), summary(), speedup(), compare(), memory_bandwidth(), matmul_peak()
    perflab.syncs       count_host_syncs(), assert_no_host_syncs()
    perflab.compiles    count_compiles()
    perflab.memory      peak_memory(), device_memory()
    perflab.env         pick_device(), fingerprint(), synchronize()
    perflab.results     ResultsLog, open_run()
    perflab.profiling   profile()
    perflab.params      validate(), load_preset()
    perflab.notebooks   discover / run / refresh notebooks (behind the `perflab` command)
Studies live in subpackages (perflab.probe1d, perflab.prover, perflab.vae, perflab.latentwire).
"""
__version__ = "0.1.0"
