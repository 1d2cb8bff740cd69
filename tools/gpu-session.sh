#!/usr/bin/env bash
# A GPU host lent for a short time, whose commands are cut at 10 minutes and which is given back when idle (and after
# 30 minutes held, bare again the next time), with 15 minutes of device time a window (its start included): run
# `perflab gpu-check` there detached, in calls that each end well inside the limit, bring the folder back after each
# window, and carry it into the next one, where gpu-check skips what is done. Windows: params/gpu-smoke/ESTIMATE.md.
#
# Here (a checkout with git, its commit clean: on a dirty tree gpu-check skips nothing):
#   bash tools/gpu-session.sh prepare          # empties .whl/, brings the wheels the GPU image lacks into it
#                                              # (../shared/tools/device-wheels.sh; nbval and coverage, which nbval's
#                                              # pytest plugin imports), checks that they install offline for the
#                                              # host's Python 3.12, one version each, and writes .whl/COMMIT (the
#                                              # commit the copy is made of: the copy has no .git)
# There (from the project root, with .whl and .gpu-res carried), in back-to-back calls:
#   bash tools/gpu-session.sh start smoke      # the quick GPU tests + all six notebooks on params/gpu-smoke/
#                                              # (~5.7 min cold by params/gpu-smoke/ESTIMATE.md)
#   bash tools/gpu-session.sh start tests      # the compiled GPU tests alone (inductor, CUDA graphs, torchrun, ...;
#                                              # `start tests all`: every GPU test, `start tests quick`: the smoke's)
#   bash tools/gpu-session.sh start full --tests 04_early_exit   # the compiled GPU tests, then 04 on params/gpu/
#   bash tools/gpu-session.sh start full 03_eval 05_vae_sync     # their params/gpu/ presets; no names: all six
#   bash tools/gpu-session.sh wait 560         # until done or 560 s; packs the folder into $OUT/res.tgz and its
#                                              # compile caches into $OUT/cache.tgz (cache-2.tgz), each file under
#                                              # the 16 MiB that can come back (newest entries kept), each time
# Call `wait` again at once while it says "running". `start` first unpacks .gpu-res/res.tgz and .gpu-res/cache*.tgz
# (the previous window's, never over newer files), so a window that was cut goes on where the last `wait` packed it:
# every notebook (and test part) finished at this commit is skipped, the one it cut runs again (`--redo`: everything
# again). Arguments after the names go to gpu-check (`-p verdict_time=10`; another value is another run).
# Back here after each window:
#   bash tools/gpu-session.sh bring DIR        # DIR holds that window's res.tgz (cache*.tgz): unpacks the folder into
#                                              # outputs/<gpu kind>/<commit>/ (REPORT.md: commit it as the run's evidence)
#                                              # and keeps them in .gpu-res/ for the next window's carry
set -u
cmd=${1:?prepare|start|wait|bring}; shift
here=$(cd "$(dirname "$0")/.." && pwd)        # the checkout this script belongs to (its src/ has perflab.runner.gpucheck)
R=${GPU_SESSION_RES:-/tmp/res}               # the run folders on the lent host (tests point it elsewhere)
base=$(dirname "$R") && name=$(basename "$R")
MAX_MIB=${GPU_SESSION_MAX_MIB:-16}           # the largest file that comes back from $OUT
MAX=$((MAX_MIB * 1024 * 1024))
CACHE_PARTS=${GPU_SESSION_CACHE_PARTS:-2}    # cache files at most (8 files and 64 MiB come back; 64 MiB travel in)
gpucheck() { PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}" python3 -m perflab.runner.gpucheck "$@"; }
seed() {  # the previous window's folder and caches: what it finished is not run again
  for t in .gpu-res/res.tgz .gpu-res/cache*.tgz; do
    [ -f "$t" ] && mkdir -p "$R" && tar -xzf "$t" -C "$base" --skip-old-files --exclude="$name/progress.log" \
      && echo "seeded $R from $t"
  done
  return 0
}
case "$cmd" in
prepare)
  if [ -x ../shared/tools/device-wheels.sh ]; then
    rm -rf .whl  # exactly one version of each wheel: nothing left from an earlier prepare (two stop the install)
    ../shared/tools/device-wheels.sh nbval coverage || { echo "prepare: device-wheels.sh failed" >&2; exit 1; }
  else
    echo "no ../shared/tools/device-wheels.sh: bring papermill's wheels (and nbval, coverage) into .whl/ yourself;" \
         "checking what is there" >&2
  fi
  mkdir -p .whl
  gpucheck wheels .whl || { echo "prepare: keep one version of each wheel in .whl/" >&2; exit 1; }
  # what `start` does there, into a clean folder here, for the host's interpreter (CPython 3.12, x86-64 Linux)
  tmp=$(mktemp -d)
  plat=()
  for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 \
           manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64 linux_x86_64; do
    plat+=(--platform "$p")
  done
  if ! PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --only-binary=:all: \
         --python-version 3.12 --implementation cp "${plat[@]}" --target "$tmp" .whl/*.whl; then
    rm -rf "$tmp"; echo "prepare: the wheels in .whl/ do not install offline: start would stop there" >&2; exit 1
  fi
  echo "the wheels install offline into a clean folder ($(ls .whl/*.whl | wc -l) wheels, $(du -sh .whl | cut -f1))"
  rm -rf "$tmp"
  sha=$(git rev-parse HEAD) || exit 1
  [ -n "$(git status --porcelain --untracked-files=no)" ] && sha="$sha-dirty"
  echo "$sha" > .whl/COMMIT && echo "prepared .whl/ for commit $sha"
  ;;
seed) seed ;;
start)
  what=${1:?smoke|full}; shift
  tests=""
  case "$what" in
    smoke) tests=quick; args=(perflab.runner.cli gpu-check --params gpu-smoke) ;;
    tests) tests=compiled; case "${1:-}" in quick|compiled|all) tests=$1; shift ;; esac
           args=(perflab.runner.gpucheck tests) ;;
    full)  [ "${1:-}" = --tests ] && { tests=compiled; shift; }
           args=(perflab.runner.cli gpu-check --params gpu); [ -z "$tests" ] && args+=(--no-tests) ;;
    *) echo "start smoke | tests | full [--tests] [NAME ...] [--redo] [-p NAME=VALUE ...]" >&2; exit 2 ;;
  esac
  args+=("$@")
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  PYTHONPATH=/tmp/site python3 -m ipykernel install --prefix /tmp/jk --name perflab --display-name "Python (perflab)" >/dev/null 2>&1
  rm -rf /tmp/w "$R/progress.log" && mkdir -p /tmp/w "$R" && cp -r . /tmp/w/ && rm -rf /tmp/w/.whl /tmp/w/.gpu-res  # $R keeps earlier runs
  seed
  commit=$(cat .whl/COMMIT 2>/dev/null || echo unknown)
  short=${commit:0:7}; case "$commit" in *-dirty) short="$short-dirty" ;; esac
  cat > /tmp/w/.run.sh <<RUN
cd /tmp/w
export PYTHONPATH=/tmp/site:/tmp/w/src PYTHONUNBUFFERED=1 JUPYTER_PATH=/tmp/jk/share/jupyter MPLBACKEND=Agg \
       PATH=/tmp/site/bin:\$PATH PERFLAB_COMMIT=$commit PERFLAB_GPU_TESTS=$tests
kind=\$(python3 -c "from perflab.kit.env import device_kind, pick_device; print(device_kind(pick_device('cuda')))")
# the folder perflab gpu-check names (outputs/<gpu kind>/<commit>/), under $R; its compile caches in compile-cache/
python3 -m ${args[*]} --out $R/\$kind/$short$([ "$what" = tests ] || echo " --no-progress") >> $R/log.txt 2>&1
echo "ALLDONE rc=\$?" >> $R/progress.log
RUN
  (setsid nohup bash /tmp/w/.run.sh > /tmp/run.log 2>&1 < /dev/null &)
  echo "started: python3 -m ${args[*]}${tests:+ (GPU tests: the $tests part)} -> $R/<gpu kind>/$short"
  ;;
wait)
  end=$((SECONDS + ${1:-560}))
  while [ $SECONDS -lt $end ] && ! grep -q ALLDONE "$R/progress.log" 2>/dev/null; do sleep 5; done
  grep -q ALLDONE "$R/progress.log" 2>/dev/null && cat "$R/progress.log" || { echo running; tail -3 "$R/log.txt"; }
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader 2>/dev/null
  tar -czf "$OUT/res.tgz" --exclude='*.html' --exclude='*.pt' --exclude=compile-cache -C "$base" "$name"
  size=$(stat -c %s "$OUT/res.tgz")
  echo "res.tgz: $((size / 1024)) KiB (the limit is $MAX_MIB MiB a file)"
  [ "$size" -gt $MAX ] && echo "res.tgz is over $MAX_MIB MiB: it will not come back" >&2
  # the compile caches, newest entries first, in at most $CACHE_PARTS files under the limit; what does not fit is
  # left out and compiled again by the next window (perflab.runner.gpucheck.pack_cache)
  gpucheck pack-cache "$R" "$OUT" --limit-mib "$MAX_MIB" --parts "$CACHE_PARTS" || echo "pack-cache failed" >&2
  ls -la "$OUT"
  ;;
bring)
  from=${1:?bring DIR: the folder holding res.tgz}
  [ -f "$from/res.tgz" ] || { echo "no $from/res.tgz" >&2; exit 1; }
  mkdir -p .gpu-res outputs && cp "$from/res.tgz" .gpu-res/ || exit 1
  if ls "$from"/cache*.tgz >/dev/null 2>&1; then  # else the last ones that came back stay
    rm -f .gpu-res/cache*.tgz && cp "$from"/cache*.tgz .gpu-res/
  fi
  tar -xzf "$from/res.tgz" -C outputs --strip-components=1 --exclude=res/log.txt --exclude=res/progress.log || exit 1
  tar -tzf "$from/res.tgz" | grep -E '^res/[^/]+/[^/]+/REPORT.md$' | sed 's|^res/|outputs/|'
  echo "for the next window carry .whl and .gpu-res ($(du -sh .gpu-res | cut -f1); with .whl and the tree, at most 64 MiB travel)"
  ;;
*) echo "usage: gpu-session.sh prepare | start smoke | start tests | start full [--tests] [NAME ...] [--redo] | wait SECONDS | bring DIR" >&2; exit 2 ;;
esac
