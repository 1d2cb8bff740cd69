# perflab: two commands are the contract (see README).
#   make run   set up .venv and run every notebook on its defaults into outputs/local/ (+ REPORT.md)
#   make test  set up .venv, then pytest over tests/ and nbval over notebooks/
#   make test-fast the edit loop: ruff and the tests not marked slow (no notebook executed, no Slurm, no browser)
#   make test-min  the same pytest on the oldest torch pyproject.toml accepts (torch==2.11.0, its own venv)
#   make nbval-kernels  nbval again under other CPU kernels (ATen's default, MKL's compatible path): host-proof outputs
#   make lab   JupyterLab on the perflab kernel
#   make mutate    mutation testing (mutmut) of the kit and the studies' optimized code, each with its fast tests, then
#                  the planted bugs; report in outputs/mutation/<commit>/REPORT.md (not part of make test: ~5-20 min a
#                  module); make planted (the planted bugs only), make flakes (the fast tier in random orders)
#
# GPU hosts: install your CUDA build of torch instead of the CPU pin, e.g.
#   make run TORCH_INDEX=https://download.pytorch.org/whl/cu130   (torch==2.13.0: what CI tests)
# or reuse a torch already installed system-wide:
#   make run VENV_FLAGS=--system-site-packages TORCH=

PYTHON      ?= python3
VENV        ?= .venv
TORCH       ?= torch==2.13.0
TORCH_INDEX ?=
VENV_FLAGS  ?=
OUT         ?= outputs/local

PY    := $(VENV)/bin/python
STAMP := $(VENV)/.perflab-installed

# nbval runs NBVAL_WORKERS notebooks at a time (pytest-xdist; --dist loadfile keeps a notebook's cells in order in
# one kernel): each notebook times on one torch thread, and its checked cells print no timing
NBVAL_WORKERS ?= 2
NBVAL_FLAGS := --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
               --nbval-cell-timeout=900 -p no:cacheprovider -n $(NBVAL_WORKERS) --dist loadfile

# test-min: the declared floor (pyproject.toml's torch>=2.11; the GPU host's torch) as a tested fact. PyPI's
# torch 2.11.0 for x86_64 Linux is the CUDA 13.0 build (~4 GB with its nvidia-* wheels); it runs on the CPU.
MIN_VENV  ?= .venv-torch2.11
MIN_TORCH ?= torch==2.11.0

.PHONY: setup run test test-fast nbval nbval-kernels test-wheel test-min mutate planted flakes lab clean distclean

setup: $(STAMP)

# Re-runs only when the dependency list or this file changes: a second `make` is instant.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH)" ]; then \
	  echo "installing $(TORCH) $(if $(TORCH_INDEX),from $(TORCH_INDEX))"; \
	  $(PY) -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	fi
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name perflab --display-name "Python (perflab)" >/dev/null
	@$(PY) -c "import torch, perflab; print('perflab', perflab.__version__, '| torch', torch.__version__, '| cuda', torch.cuda.is_available())"
	touch $(STAMP)

run: setup
	$(VENV)/bin/perflab run --out $(OUT)

# pytest in TEST_WORKERS processes (pytest-xdist), each test file in one: 12 min alone on 2 cores, 7 min so
TEST_WORKERS ?= 2
test: setup
	$(VENV)/bin/ruff check src tests notebooks tools
	$(PY) -m pytest -q -m "not wheel" -n $(TEST_WORKERS) --dist loadfile tests
	@$(MAKE) --no-print-directory nbval

# the edit loop (under 2 minutes on a 2-core CPU): what is marked slow (a notebook executed, a compile with inductor, a
# sweep; > ~1.5 s each), the wheel, Slurm, the browser and nbval are left to make test
test-fast: setup
	$(VENV)/bin/ruff check src tests notebooks tools
	$(PY) -m pytest -q -m "not slow and not wheel and not slurm and not browser" tests

# the wheel in a fresh venv outside the checkout, then a new study to a report (docs/new-study.md): ~1.5-2 min, after
# make test in .ci/run, as test-min is
test-wheel: setup
	$(PY) -m pytest -q -m wheel tests

# nbval compares the checked cells with the committed outputs, which are the notebooks' CPU defaults: on a GPU host
# too their kernels run on the CPU (CUDA hidden from them), so a count or a rounded metric is compared with the
# device it was recorded on. The GPU path has its own checks: pytest -m gpu and perflab gpu-check.
# (After `make setup`; NOTEBOOKS: what to check.)
# NBVAL_TIME_SCALE: each timed claim's budget (verdict_time) times this under nbval (perflab.kit.notebook): the checked
# cells print counts and pass/fail, which no budget changes; 04's three 45-s decisions were most of nbval's 7 minutes
# (0.2 since issue 50's first look waits for 200 calls of each side: make test was 15 min 34 s at 0.25).
NOTEBOOKS ?= notebooks
NBVAL_TIME_SCALE ?= 0.2
nbval:
	@if [ -n "$$(find $(NOTEBOOKS) -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null)" ]; then \
	  echo "nbval over $(NOTEBOOKS) (on the CPU)"; \
	  CUDA_VISIBLE_DEVICES= PERFLAB_TIME_SCALE=$(NBVAL_TIME_SCALE) $(PY) -m pytest -q $(NBVAL_FLAGS) $(NOTEBOOKS); \
	else echo "no notebooks in $(NOTEBOOKS): nbval has nothing to check"; fi

# nbval again under other CPU kernels: ATen's scalar code instead of its AVX2/AVX-512 kernels, and MKL's
# conditional-numerical-reproducibility path (the BLAS of the torch wheels, which takes other paths on AMD and on
# Intel). A checked cell that prints what depends on the host's kernels (a rounding-level magnitude) fails here on
# your machine first, not on a user's. .ci/run runs it after make test.
# Its own inductor cache: inductor's cache key does not hold ATEN_CPU_CAPABILITY, so kernels compiled here without
# vector code were read back by every later compile of the same graph in the shared cache (02's compiled LM iteration
# went from 2.9x faster than eager to 1.7x slower), and this leg would read the vector kernels of earlier runs.
KERNELS_INDUCTOR_CACHE ?= $(or $(TMPDIR),/tmp)/perflab-inductor-aten-default
nbval-kernels: setup
	@echo "nbval under ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE (inductor cache $(KERNELS_INDUCTOR_CACHE))"
	@ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE TORCHINDUCTOR_CACHE_DIR=$(KERNELS_INDUCTOR_CACHE) \
	  $(MAKE) --no-print-directory nbval

# pytest only: nbval's checked outputs were made on the pinned torch; the Slurm and browser tests drive clients
# (slurm-wlm, chromium), which do not depend on torch's version; the wheel test installs a torch of its own (here
# a second 4-GB CUDA build): packaging, not torch's version
test-min:
	$(MAKE) --no-print-directory setup VENV=$(MIN_VENV) TORCH=$(MIN_TORCH)
	$(MIN_VENV)/bin/python -m pytest -q -m "not slurm and not browser and not wheel" tests

# mutation testing (issues 39, 48): mutmut and pytest-randomly, pinned in pyproject.toml's `mutation` extra, installed
# on first use. mutmut one module at a time (MODULES: names from mutation/mutate.py, or all), each with its fast tests
# only, one worker at nice 19 (MUTATE_FLAGS: e.g. --until 15:40 to start no module after then, --children 2); then the
# planted bugs (mutation/planted.py: realistic ones written by hand, each planted alone in a scratch copy against its
# tests, the fast tier and its folder's slow tier; PLANTED: some by name; PLANT_FLAGS: e.g. --tests-at main); then
# the report: both kill rates by area. Survivors and equivalent mutants: mutation/equivalent.toml and the report.
# make planted: the planted bugs only; make flakes: the fast tier RUNS times in random orders and seeds
# (mutation/flakes.py), into the same report.
MODULES      ?= all
MUTATE_FLAGS ?=
PLANTED      ?=
PLANT_FLAGS  ?=
RUNS         ?= 20
MUTATION_DEPS = @$(PY) -c "import mutmut, pytest_randomly" 2>/dev/null || $(PY) -m pip install -q -e '.[mutation]'
mutate: setup
	$(MUTATION_DEPS)
	$(PY) mutation/mutate.py $(MUTATE_FLAGS) $(MODULES)
	$(PY) mutation/plant.py $(PLANT_FLAGS) $(PLANTED)
	$(PY) mutation/mutate.py --report

planted: setup
	$(MUTATION_DEPS)
	$(PY) mutation/plant.py $(PLANT_FLAGS) $(PLANTED)
	$(PY) mutation/mutate.py --report

flakes: setup
	$(MUTATION_DEPS)
	$(PY) mutation/flakes.py --runs $(RUNS); status=$$?; $(PY) mutation/mutate.py --report; exit $$status

# root (containers, cloud images) must say so to JupyterLab; nbval's conftest.py is no notebook: hidden from the
# file browser (with Jupyter's own default hidden names). LAB_DIR and LAB_ARGS: what tests/project/test_lab.py changes.
LAB_DIR   ?= notebooks
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_ARGS  ?=
LAB_HIDE  := "--ContentsManager.hide_globs=['__pycache__','*.pyc','*.pyo','.DS_Store','*.so','*.dylib','*~','conftest.py']"
lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=$(LAB_DIR) $(LAB_HIDE) $(LAB_FLAGS) $(LAB_ARGS)

clean:
	rm -rf $(OUT) .pytest_cache

distclean: clean
	rm -rf $(VENV) $(MIN_VENV) src/*.egg-info
