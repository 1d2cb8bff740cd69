#!/usr/bin/env bash
# A GPU host lent for a short time, whose commands are cut at 10 minutes and which is given back when idle:
# run `perflab gpu-check` there detached, in calls that each end well inside the limit, and bring the folder back.
#
# Here (a checkout with git):
#   bash tools/gpu-session.sh prepare          # wheels the GPU image lacks into .whl/ (../shared/tools/device-wheels.sh)
#                                              # and .whl/COMMIT: the commit the copy is made of (the copy has no .git)
# There (from the project root, with .whl carried), in back-to-back calls:
#   bash tools/gpu-session.sh start smoke      # pytest -m gpu + all six notebooks on params/gpu-smoke/ (~5 min)
#   bash tools/gpu-session.sh start full 03_eval 05_vae_sync 06_latentwire_amp   # their params/gpu/ presets
#   bash tools/gpu-session.sh wait 560         # until done or 560 s; packs /tmp/res into $OUT/res.tgz each time
# Call `wait` again at once while it says "running". Back here: tar -xzf res.tgz -C outputs --strip-components=1
# gives outputs/<gpu kind>/<commit>/ with REPORT.md (commit it as the run's evidence).
set -u
cmd=${1:?prepare|start|wait}; shift
R=/tmp/res
case "$cmd" in
prepare)
  [ -x ../shared/tools/device-wheels.sh ] && ../shared/tools/device-wheels.sh || echo "no ../shared/tools/device-wheels.sh: bring papermill's wheels into .whl/ yourself" >&2
  mkdir -p .whl
  sha=$(git rev-parse HEAD) || exit 1
  [ -n "$(git status --porcelain --untracked-files=no)" ] && sha="$sha-dirty"
  echo "$sha" > .whl/COMMIT && echo "prepared .whl/ for commit $sha"
  ;;
start)
  what=${1:?smoke|full}; shift
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  PYTHONPATH=/tmp/site python3 -m ipykernel install --prefix /tmp/jk --name perflab --display-name "Python (perflab)" >/dev/null 2>&1
  rm -rf /tmp/w "$R/progress.log" && mkdir -p /tmp/w "$R" && cp -r . /tmp/w/ && rm -rf /tmp/w/.whl  # $R keeps earlier runs
  commit=$(cat .whl/COMMIT 2>/dev/null || echo unknown)
  short=${commit:0:7}; case "$commit" in *-dirty) short="$short-dirty" ;; esac
  case "$what" in
    smoke) args=(gpu-check "$@" --params gpu-smoke) ;;
    full)  args=(gpu-check "$@" --params gpu --no-tests) ;;
    *) echo "start smoke|full [NAME ...]" >&2; exit 2 ;;
  esac
  cat > /tmp/w/.run.sh <<RUN
cd /tmp/w
export PYTHONPATH=/tmp/site:/tmp/w/src PYTHONUNBUFFERED=1 JUPYTER_PATH=/tmp/jk/share/jupyter MPLBACKEND=Agg \
       PATH=/tmp/site/bin:\$PATH PERFLAB_COMMIT=$commit
kind=\$(python3 -c "from perflab.env import device_kind, pick_device; print(device_kind(pick_device('cuda')))")
# the folder perflab gpu-check names (outputs/<gpu kind>/<commit>/), under $R
python3 -m perflab.cli ${args[*]} --out $R/\$kind/$short --no-progress > $R/log.txt 2>&1
echo "ALLDONE rc=\$?" >> $R/progress.log
RUN
  (setsid nohup bash /tmp/w/.run.sh > /tmp/run.log 2>&1 < /dev/null &)
  echo "started: perflab ${args[*]} -> $R/<gpu kind>/$short"
  ;;
wait)
  end=$((SECONDS + ${1:-560}))
  while [ $SECONDS -lt $end ] && ! grep -q ALLDONE $R/progress.log 2>/dev/null; do sleep 5; done
  grep -q ALLDONE $R/progress.log 2>/dev/null && cat $R/progress.log || { echo running; tail -3 $R/log.txt; }
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
  tar -czf "$OUT/res.tgz" --exclude='*.html' --exclude='*.pt' -C /tmp res && ls -la "$OUT"
  ;;
*) echo "usage: gpu-session.sh prepare | start smoke|full [NAME ...] | wait SECONDS" >&2; exit 2 ;;
esac
