"""perflab: a Jupyter-notebook research workbench for PyTorch performance studies.

The measuring kit (import what you need):
    perflab.bench       measure(), summary(), speedup(), compare(), memory_bandwidth(), matmul_peak()
    perflab.syncs       count_host_syncs(), assert_no_host_syncs()
    perflab.launches    count_launches()   (kernels on CUDA; dispatched aten ops on CPU)
    perflab.compiles    count_compiles(), compile_kwargs()
    perflab.memory      peak_memory(), device_memory()
    perflab.env         pick_device(), fingerprint(), synchronize()
    perflab.results     ResultsLog
    perflab.run         setup(name, globals(), Params) (every notebook's first cell), open_run(), Run
    perflab.profiling   profile()
    perflab.params      RunParams, validate(), parse_assignment(), load_preset(): the one validator
    perflab.notebooks   discover / run / refresh notebooks (behind the `perflab` command)
    perflab.new         `perflab new NAME`: a study of your own, from the template in perflab/template/
Studies live in subpackages (perflab.probe1d, perflab.prover, perflab.vae, perflab.latentwire), each with
the same rooms: params.py (the notebooks' parameters), data.py, reference.py, baseline.py, optimized.py,
study.py (the notebook's measurements), claims.py (the seed's claims and their verdict rules).
"""
__version__ = "0.1.0"
