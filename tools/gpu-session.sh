#!/usr/bin/env bash
# A GPU host lent for a short time, whose commands are cut at 10 minutes and which is given back when idle (and after
# 30 minutes held, bare again the next time): run `perflab gpu-check` there detached, in calls that each end well inside
# the limit, bring the folder back after each window, and carry it into the next one, where gpu-check skips what is done.
#
# Here (a checkout with git, its commit clean: on a dirty tree gpu-check skips nothing):
#   bash tools/gpu-session.sh prepare          # wheels the GPU image lacks into .whl/ (../shared/tools/device-wheels.sh; nbval for make nbval)
#                                              # and .whl/COMMIT: the commit the copy is made of (the copy has no .git)
# There (from the project root, with .whl and .gpu-res carried), in back-to-back calls:
#   bash tools/gpu-session.sh start smoke      # pytest -m gpu + all six notebooks on params/gpu-smoke/
#                                              # (~8 min cold by params/gpu-smoke/ESTIMATE.md)
#   bash tools/gpu-session.sh start full 03_eval 05_vae_sync   # their params/gpu/ presets; no names: all six
#   bash tools/gpu-session.sh wait 560         # until done or 560 s; packs the folder into $OUT/res.tgz (and its
#                                              # compile caches into $OUT/cache.tgz) each time
# Call `wait` again at once while it says "running". `start` first unpacks .gpu-res/res.tgz and .gpu-res/cache.tgz (the
# previous window's, never over newer files), so a window that was cut goes on where the last `wait` packed it: every
# notebook finished by then is skipped, the one it cut runs again (`start smoke --redo`: everything again).
# Back here after each window:
#   bash tools/gpu-session.sh bring DIR        # DIR holds that window's res.tgz (cache.tgz): unpacks the folder into
#                                              # outputs/<gpu kind>/<commit>/ (REPORT.md: commit it as the run's evidence)
#                                              # and keeps both in .gpu-res/ for the next window's carry
set -u
cmd=${1:?prepare|start|wait|bring}; shift
R=/tmp/res
MAX=$((16 * 1024 * 1024))  # the largest file that comes back from $OUT
case "$cmd" in
prepare)
  [ -x ../shared/tools/device-wheels.sh ] && ../shared/tools/device-wheels.sh nbval || echo "no ../shared/tools/device-wheels.sh: bring papermill's wheels into .whl/ yourself" >&2
  mkdir -p .whl
  sha=$(git rev-parse HEAD) || exit 1
  [ -n "$(git status --porcelain --untracked-files=no)" ] && sha="$sha-dirty"
  echo "$sha" > .whl/COMMIT && echo "prepared .whl/ for commit $sha"
  ;;
start)
  what=${1:?smoke|full}; shift
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  PYTHONPATH=/tmp/site python3 -m ipykernel install --prefix /tmp/jk --name perflab --display-name "Python (perflab)" >/dev/null 2>&1
  rm -rf /tmp/w "$R/progress.log" && mkdir -p /tmp/w "$R" && cp -r . /tmp/w/ && rm -rf /tmp/w/.whl /tmp/w/.gpu-res  # $R keeps earlier runs
  for t in .gpu-res/res.tgz .gpu-res/cache.tgz; do  # the previous window's folder: what it finished is not run again
    [ -f "$t" ] && tar -xzf "$t" -C /tmp --skip-old-files --exclude=res/progress.log && echo "seeded $R from $t"
  done
  commit=$(cat .whl/COMMIT 2>/dev/null || echo unknown)
  short=${commit:0:7}; case "$commit" in *-dirty) short="$short-dirty" ;; esac
  case "$what" in
    smoke) args=(gpu-check "$@" --params gpu-smoke) ;;
    full)  args=(gpu-check "$@" --params gpu --no-tests) ;;
    *) echo "start smoke|full [NAME ...] [--redo]" >&2; exit 2 ;;
  esac
  cat > /tmp/w/.run.sh <<RUN
cd /tmp/w
export PYTHONPATH=/tmp/site:/tmp/w/src PYTHONUNBUFFERED=1 JUPYTER_PATH=/tmp/jk/share/jupyter MPLBACKEND=Agg \
       PATH=/tmp/site/bin:\$PATH PERFLAB_COMMIT=$commit
kind=\$(python3 -c "from perflab.env import device_kind, pick_device; print(device_kind(pick_device('cuda')))")
# the folder perflab gpu-check names (outputs/<gpu kind>/<commit>/), under $R; its compile caches in compile-cache/
python3 -m perflab.cli ${args[*]} --out $R/\$kind/$short --no-progress >> $R/log.txt 2>&1
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
  tar -czf "$OUT/res.tgz" --exclude='*.html' --exclude='*.pt' --exclude=compile-cache -C /tmp res
  # compile-cache/triton/ is left out: inductor's FX graph cache bundles each graph's Triton kernels (torch's
  # TritonBundler, on by default) and writes them back on a hit
  caches=$(cd /tmp && find res -mindepth 3 -maxdepth 3 -type d -name compile-cache)
  [ -n "$caches" ] && (cd /tmp && tar -czf "$OUT/cache.tgz" --exclude=compile-cache/triton $caches)
  for f in "$OUT/res.tgz" "$OUT/cache.tgz"; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt $MAX ] && echo "$(basename "$f") is over 16 MiB: it will not come back" \
      "$([ "${f##*/}" = cache.tgz ] && echo "(the next window compiles cold)")" >&2
  done
  ls -la "$OUT"
  ;;
bring)
  from=${1:?bring DIR: the folder holding res.tgz}
  [ -f "$from/res.tgz" ] || { echo "no $from/res.tgz" >&2; exit 1; }
  mkdir -p .gpu-res outputs && cp "$from/res.tgz" .gpu-res/ || exit 1
  [ -f "$from/cache.tgz" ] && cp "$from/cache.tgz" .gpu-res/  # else the last one that came back stays
  tar -xzf "$from/res.tgz" -C outputs --strip-components=1 --exclude=res/log.txt --exclude=res/progress.log || exit 1
  tar -tzf "$from/res.tgz" | grep -E '^res/[^/]+/[^/]+/REPORT.md$' | sed 's|^res/|outputs/|'
  echo "for the next window carry .whl and .gpu-res ($(du -sh .gpu-res | cut -f1))"
  ;;
*) echo "usage: gpu-session.sh prepare | start smoke|full [NAME ...] [--redo] | wait SECONDS | bring DIR" >&2; exit 2 ;;
esac
