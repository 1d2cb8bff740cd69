#!/usr/bin/env bash
# A lent GPU host runs one command at most 10 minutes and is given back after 30 s idle (and after 30 minutes held,
# bare again the next time), with 15 minutes of device time a window, its start included. So each step is ONE call
# of this script there: it installs the wheels, starts `perflab gpu-check` in the foreground, stops it by a deadline
# below the command's limit, packs what finished into $OUT and ends with a one-screen summary. Nothing waits for a
# second call: the next one (in this window or a later one) carries what `bring` kept here and goes on from there.
# Windows and estimates: params/gpu-smoke/ESTIMATE.md.
#
# Here (a checkout with git, its commit clean: on a dirty tree gpu-check skips nothing):
#   bash tools/gpu-session.sh rehearse [smoke|tests|full ...]   # a call on a copy of the tree as it travels (no
#                                              # .git; .whl, or a stand-in wheel; no network), run here up to where
#                                              # CUDA is needed: it must stop there with "no CUDA" after the wheels,
#                                              # kernel spec, imports and the runner's plan, and what it leaves in $OUT
#                                              # must come back (make test runs it: tests/tools/test_gpu_window.py)
#   bash tools/gpu-session.sh prepare          # empties .whl/, fetches the pinned wheels the GPU image lacks
#                                              # (tools/gpu-wheels.txt; tools/gpu-image.txt: what the image has) for
#                                              # CPython 3.11, 3.12 and 3.13 (pure ones in .whl/, binary ones in
#                                              # .whl/cpXY/), checks that each Python's set is closed under its
#                                              # requirements with the image's packages and installs offline, one
#                                              # version each, and writes .whl/COMMIT (the commit the copy is made
#                                              # of: the copy has no .git); each file must be the one
#                                              # tools/gpu-wheels.lock holds (sha256; after a pin
#                                              # changes: python -m gpuwindow wheels lock .whl)
# There, one call each (carry .whl and .gpu-res; timeout_s 600):
#   bash tools/gpu-session.sh smoke            # the quick GPU tests + every notebook on params/gpu-smoke/
#   bash tools/gpu-session.sh tests            # the compiled GPU tests alone (inductor, CUDA graphs, torchrun, ...;
#                                              # `tests all`: every GPU test, `tests quick`: the smoke's)
#   bash tools/gpu-session.sh full --tests 04_early_exit   # the compiled GPU tests, then 04 on params/gpu/
#   bash tools/gpu-session.sh full 03_eval 05_vae_sync     # their params/gpu/ presets; no names: all of them
# Each call ends by $GPU_SESSION_DEADLINE seconds (540: 60 s under the command's limit) with the summary (per test
# part and notebook: ok / failed / skipped / cut, seconds) and its exit status: 0 all ok or skipped, 1 a part failed,
# 2 the start failed (wheels, kernel, imports, no CUDA: the reason on the lines above), 3 a part was cut by the
# deadline (the next call goes on from there). Nothing can hold the machine past the deadline: each notebook cell and
# each GPU test has a limit sized from the estimate (perflab.runner.estimate; papermill's execution_timeout,
# pytest-timeout), every child of the call has a limit (timeout(1) here, the runner's own), a notebook whose estimate
# does not fit in what is left is not started (the call's first always is), the one running at the runner's deadline is stopped at its cell, and timeout(1) stops the runner 15 s
# later. $OUT gets res.tgz (the run folders: results, REPORT.md, window.jsonl), log.txt (this call's log) and
# cache*.tgz (compile caches, newest first, each under the 16 MiB a file that comes
# back). The call first unpacks .gpu-res/ (the last call's, never over newer files), so every notebook (and test
# part) finished at this commit is skipped and the one a deadline cut runs again (`--redo`: everything again).
# Arguments after the names go to gpu-check (`-p verdict_time=10`; another value is another run).
# Back here after each call:
#   bash tools/gpu-session.sh bring DIR        # DIR holds that call's res.tgz, log.txt (cache*.tgz): unpacks the
#                                              # folder into outputs/<gpu kind>/<commit>/ (REPORT.md, and
#                                              # gpu-check.log with each call's log appended, also a call that failed
#                                              # before the notebooks: commit them as the run's evidence), keeps them
#                                              # in .gpu-res/ for the next call's carry and says what it will carry
set -u
cmd=${1:?prepare|smoke|tests|full|bring}; shift
here=$(cd "$(dirname "$0")/.." && pwd)        # the checkout this script belongs to (its src/ has perflab.runner)
R=${GPU_SESSION_RES:-/tmp/res}               # the run folders on the lent host (tests point it elsewhere)
base=$(dirname "$R") && name=$(basename "$R")
PY=${GPU_SESSION_PYTHON:-python3}            # the host's Python, with its torch
SITE=${GPU_SESSION_SITE:-/tmp/site}          # where the wheels are installed there
KERNELS=${GPU_SESSION_KERNELS:-/tmp/jk}      # the perflab kernel spec there
WORK=${GPU_SESSION_WORK:-/tmp/w}             # the copy of the tree the runner runs in
DEADLINE=${GPU_SESSION_DEADLINE:-540}        # seconds from the call's start to its last line
PACK_S=${GPU_SESSION_PACK_S:-40}             # of which kept for packing and the summary after the runner stops
IMPORT_S=${GPU_SESSION_IMPORT_S:-120}        # the start's import check at most (~5 s on a host; rehearse: longer)
MAX_MIB=${GPU_SESSION_MAX_MIB:-16}           # the largest file that comes back from $OUT
MAX=$((MAX_MIB * 1024 * 1024))
CACHE_PARTS=${GPU_SESSION_CACHE_PARTS:-2}    # cache files at most (8 files and 64 MiB come back; 64 MiB travel in)
# the window tooling beside this script (tools/gpuwindow), on the host's Python; each with a limit of its own
window() { PYTHONPATH="$here/tools:$here/src${PYTHONPATH:+:$PYTHONPATH}" timeout -k 5 120 "$PY" -m gpuwindow "$@"; }
seed() {  # the previous call's folder and caches: what it finished is not run again
  for t in .gpu-res/res.tgz .gpu-res/cache*.tgz; do
    [ -f "$t" ] && mkdir -p "$R" && tar -xzf "$t" -C "$base" --skip-old-files --exclude="$name/log.txt" \
      --exclude="$name/CALL" && echo "seeded $R from $t"
  done
  return 0
}
pack() {  # what finished, into $OUT: every file under the limit that comes back
  cp "$R/log.txt" "$OUT/log.txt" 2>/dev/null
  tar -czf "$OUT/res.tgz" --exclude='*.html' --exclude='*.pt' --exclude=compile-cache -C "$base" "$name"
  size=$(stat -c %s "$OUT/res.tgz")
  echo "res.tgz: $((size / 1024)) KiB (the limit is $MAX_MIB MiB a file)"
  [ "$size" -gt $MAX ] && echo "res.tgz is over $MAX_MIB MiB: it will not come back" >&2
  # the compile caches, newest entries first, in at most $CACHE_PARTS files under the limit and within what the next
  # call's carry leaves of its 64 MiB (gpuwindow.carry.cache_budget: this tree, res.tgz, what bring unpacks);
  # what does not fit is left out and compiled again by the next call (gpuwindow.cache.pack_cache)
  room=$(window cache-budget "$OUT/res.tgz" --root .) || room=0
  echo "room for compile caches in the next call's carry: $room MiB"
  window pack-cache "$R" "$OUT" --limit-mib "$MAX_MIB" --parts "$CACHE_PARTS" --total-mib "$room" \
    || echo "pack-cache failed" >&2
}
call() {  # one step of a window, start to summary: smoke | tests [PART] | full [--tests] [NAME ...] [gpu-check args]
  local t0=$SECONDS what=$1 tests="" args ran=0; shift
  case "$what" in
    smoke) tests=quick; args=(perflab.runner.cli gpu-check --params gpu-smoke --no-progress) ;;
    tests) tests=compiled; case "${1:-}" in quick|compiled|all) tests=$1; shift ;; esac
           args=(perflab.runner.cli gpu-check --tests-only) ;;
    full)  [ "${1:-}" = --tests ] && { tests=compiled; shift; }
           args=(perflab.runner.cli gpu-check --params gpu --no-progress); [ -z "$tests" ] && args+=(--no-tests) ;;
  esac
  args+=("$@" --root "$R")
  : "${OUT:?OUT: the folder whose files come back (the device tool sets it)}"
  export PERFLAB_WINDOW="$what-$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$R" "$OUT" && rm -f "$R/log.txt" "$R/CALL"
  log=$R/log.txt
  say() { echo "[$((SECONDS - t0)) s] $*" | tee -a "$log"; }
  finish() {  # $1: the runner's exit status, or 2 for a start that failed
    local rc=$1 sum
    commit=$(cat .whl/COMMIT 2>/dev/null || echo unknown)
    kind=$(cd "$R" && ls -d */"${commit:0:7}"* 2>/dev/null | head -1 | cut -d/ -f1)
    # a start that failed before the runner named its folder: the kind asked of CUDA, within a minute
    [ -n "$kind" ] || [ "$ran" = 1 ] || kind=$(PYTHONPATH="$here/src" timeout -k 5 60 "$PY" -c "from perflab.kit.env import device_kind, pick_device
print(device_kind(pick_device('cuda')))" 2>/dev/null)
    # what bring needs to file this call's log.txt under outputs/<gpu kind>/<commit>/gpu-check.log
    echo "window=$PERFLAB_WINDOW kind=${kind:-unknown-gpu} commit=${commit:0:7}$(case $commit in *-dirty) echo -dirty ;; esac) rc=$rc" > "$R/CALL"
    pack > "$R/pack.txt" 2>&1; cat "$R/pack.txt"; cat "$R/pack.txt" >> "$log"; cp "$log" "$OUT/log.txt"
    echo "== bash tools/gpu-session.sh $what: ${PERFLAB_WINDOW}, $((SECONDS - t0)) s of the ${DEADLINE} s deadline"
    if [ "$rc" = 2 ]; then sum=2; else
      window summary "$R"; sum=$?
    fi
    [ "$sum" = 0 ] && [ "$rc" != 0 ] && sum=1   # a runner that failed outside a part (its report, say)
    echo "exit $sum (0 ok, 1 a part failed, 2 the start failed, 3 cut by the deadline: call again to go on)"
    exit "$sum"
  }
  fail() { say "START FAILED ($1): $2"; finish 2; }
  say "$PERFLAB_WINDOW: python3 -m ${args[*]}${tests:+ (GPU tests: the $tests part)}; deadline $DEADLINE s"
  [ -f .whl/COMMIT ] || fail wheels "no .whl/COMMIT: run 'bash tools/gpu-session.sh prepare' here and carry .whl"
  # the host's CPython picks its set: .whl/*.whl (pure) and .whl/cpXY/ (binary), fetched for 3.11-3.13 by prepare
  tag=$(timeout -k 5 30 "$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>>"$log") \
    || fail wheels "$PY does not answer: $(tail -1 "$log")"
  say "$("$PY" -V 2>&1) at $(command -v "$PY" || echo "$PY"): the wheels of .whl/ and .whl/$tag/"
  [ -d ".whl/$tag" ] || fail wheels "no wheels for $("$PY" -V 2>&1) (.whl/$tag/): prepare fetched $(cd .whl && ls -d cp* 2>/dev/null | tr '\n' ' ')"
  shopt -s nullglob; local whls=(.whl/*.whl ".whl/$tag"/*.whl); shopt -u nullglob
  timeout -k 5 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "${whls[@]}" >> "$log" 2>&1 || fail wheels "pip could not install .whl/ offline: $(tail -1 "$log")"
  PYTHONPATH=$SITE timeout -k 5 60 "$PY" -m ipykernel install --prefix "$KERNELS" --name perflab \
    --display-name "Python (perflab)" >> "$log" 2>&1 || fail kernel "ipykernel install: $(tail -1 "$log")"
  rm -rf "$WORK" && mkdir -p "$WORK" && cp -r . "$WORK"/ && rm -rf "$WORK/.whl" "$WORK/.gpu-res" \
    || fail copy "could not copy the tree to $WORK"
  seed >> "$log"
  export PYTHONPATH=$SITE:$WORK/src PYTHONUNBUFFERED=1 JUPYTER_PATH=$KERNELS/share/jupyter MPLBACKEND=Agg \
         PATH=$SITE/bin:$PATH PERFLAB_COMMIT=$(cat .whl/COMMIT) PERFLAB_GPU_TESTS=$tests
  # every module the notebooks, the package and the tests import (torch and the image's packages too), one by one:
  # a broken or missing one stops the call here within seconds, named, before six notebooks fail on it
  (cd "$WORK" && PYTHONPATH=$PYTHONPATH:$WORK/tools timeout -k 5 "$IMPORT_S" "$PY" -m gpuwindow imports --root . \
     && timeout -k 5 "$IMPORT_S" "$PY" -c "import perflab.runner.cli") >> "$log" 2>&1
  rc=$?
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && fail imports "not done in ${IMPORT_S} s (a hung import: see log.txt)"
  [ "$rc" = 0 ] || fail imports "$(tail -1 "$log")"
  say "$(grep '^imports:' "$log" | tail -1 | cut -c1-150)"
  local left=$((DEADLINE - PACK_S - (SECONDS - t0)))
  [ "$left" -gt 30 ] || fail time "only $left s left for the runner after the start"
  say "started; the runner stops by itself at $((SECONDS - t0 + left - 15)) s, and is stopped at $((SECONDS - t0 + left)) s"
  set -o pipefail; ran=1
  # the runner's own deadline 15 s before timeout(1)'s SIGINT: it cuts what would not end, packs nothing itself
  (cd "$WORK" && timeout -s INT -k 20 "$left" "$PY" -m "${args[@]}" --deadline $((left - 15))) 2>&1 | tee -a "$log"
  local rc=$?
  set +o pipefail
  [ "$rc" = 124 ] && say "the deadline stopped the runner ($left s): what finished is packed"
  # exit 2: refused before anything ran (no CUDA, a notebook or preset it does not know): its line is the last
  [ "$rc" = 2 ] && say "START FAILED (runner): $(grep -v '^\[' "$log" | tail -1)"
  finish "$rc"
}
case "$cmd" in
prepare)
  py=python3; [ -x "$here/.venv/bin/python" ] && py=$here/.venv/bin/python   # pip and packaging (make setup's venv)
  # exactly one version of each wheel: .whl/ is emptied first (two stop the install there)
  PYTHONPATH="$here/tools:$here/src" "$py" -m gpuwindow wheels fetch .whl ${GPU_SESSION_PINS:+--pins "$GPU_SESSION_PINS"} \
    ${GPU_SESSION_IMAGE:+--image "$GPU_SESSION_IMAGE"} \
    || { echo "prepare: the wheels are not complete or not closed: the call would stop there" >&2; exit 1; }
  # what a call does there, into a clean folder here, for each host interpreter the set covers (x86-64 Linux)
  plat=()
  for n in 17 24 26 27 28 31 34 35 39; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
  plat+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)
  for d in .whl/cp3*; do
    v=${d##*/cp3}; tmp=$(mktemp -d)
    shopt -s nullglob; whls=(.whl/*.whl "$d"/*.whl); shopt -u nullglob
    if ! PIP_ROOT_USER_ACTION=ignore "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
           --only-binary=:all: --python-version "3.$v" --implementation cp "${plat[@]}" --target "$tmp" "${whls[@]}"; then
      rm -rf "$tmp"; echo "prepare: the wheels for Python 3.$v do not install offline: the call would stop there" >&2; exit 1
    fi
    rm -rf "$tmp"
    echo "Python 3.$v: ${#whls[@]} wheels install offline into a clean folder"
  done
  echo "the wheels: $(du -sh .whl | cut -f1) for CPython $(cd .whl && ls -d cp3* | sed 's/cp3/3./' | tr '\n' ' ')"
  sha=$(git rev-parse HEAD) || exit 1
  [ -n "$(git status --porcelain --untracked-files=no)" ] && sha="$sha-dirty"
  echo "$sha" > .whl/COMMIT && echo "prepared .whl/ for commit $sha"
  # what the call will carry (tree + .whl + .gpu-res), refused here when over the 64 MiB that travel
  PYTHONPATH="$here/tools:$here/src" "$py" -m gpuwindow carry || { echo "prepare: the call would be refused" >&2; exit 1; }
  ;;
rehearse)  # here, without a GPU: a call on a copy of the tree as it travels, up to where CUDA is needed
  t0=$SECONDS what=${1:-smoke}
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-rehearsal.XXXXXX")
  py=${GPU_SESSION_PYTHON:-$here/.venv/bin/python}   # there python3 has torch; here the venv's stands for it
  helper() { PYTHONPATH="$here/tools:$here/src" "$py" -m gpuwindow "$@"; }
  helper travel "$tmp/tree" --root . || { echo "rehearse: FAILED: the call would be refused (its carry)"; exit 1; }
  tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  if [ ! -f "$tmp/tree/.whl/COMMIT" ] || [ ! -d "$tmp/tree/.whl/$tag" ]; then
    # no prepared set for this Python (prepare fetches 3.11-3.13): a stand-in wheel goes through the install step
    rm -rf "$tmp/tree/.whl" && mkdir -p "$tmp/tree/.whl/$tag"
    "$py" - "$tmp/tree/.whl/perflab_rehearsal-0-py3-none-any.whl" <<'WHEEL'
import sys
import zipfile

i = "perflab_rehearsal-0.dist-info"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("perflab_rehearsal/__init__.py", "")
    z.writestr(i + "/METADATA", "Metadata-Version: 2.1\nName: perflab-rehearsal\nVersion: 0\n")
    z.writestr(i + "/WHEEL", "Wheel-Version: 1.0\nGenerator: rehearse\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(i + "/RECORD", "")
WHEEL
    sha=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && sha="$sha-dirty"
    echo "$sha" > "$tmp/tree/.whl/COMMIT"
    echo "rehearse: a stand-in wheel for .whl/ (none prepared here for $tag): the install step runs, not the real set"
  fi
  (cd "$tmp/tree" && env -u PYTHONPATH GPU_SESSION_RES="$tmp/res" OUT="$tmp/out" GPU_SESSION_SITE="$tmp/site" \
     GPU_SESSION_KERNELS="$tmp/jk" GPU_SESSION_WORK="$tmp/w" GPU_SESSION_PYTHON="$py" PIP_NO_INDEX=1 \
     GPU_SESSION_IMPORT_S="${GPU_SESSION_IMPORT_S:-600}" \
     bash tools/gpu-session.sh "${@:-smoke}") > "$tmp/call.txt" 2>&1
  rc=$?
  sed 's/^/  | /' "$tmp/call.txt"
  bad=()
  [ "$rc" = 2 ] || bad+=("the call exited $rc, not 2 (a start refused for want of CUDA)")
  grep -q "no CUDA device is visible" "$tmp/call.txt" || bad+=("it did not get as far as asking for CUDA")
  [ "$what" = tests ] || grep -q "notebook(s) planned on" "$tmp/call.txt" || bad+=("the runner planned no notebooks")
  grep -q "START FAILED ([a-z]*):" "$tmp/call.txt" && ! grep -q "START FAILED (runner)" "$tmp/call.txt" \
    && bad+=("$(grep -m1 'START FAILED' "$tmp/call.txt")")
  helper comeback "$tmp/out" || bad+=("not everything in \$OUT comes back")
  [ -z "${GPU_SESSION_KEEP:-}" ] && rm -rf "$tmp"
  if [ ${#bad[@]} -gt 0 ]; then
    printf "rehearse $what: FAILED: %s\n" "${bad[@]}"; exit 1
  fi
  echo "rehearse $what: ok in $((SECONDS - t0)) s (wheels, kernel spec, copy, imports and the runner's plan passed;" \
       "it stopped where CUDA is needed, with its reason)"
  ;;
seed) seed ;;                      # (the first steps of a call, alone: for tests)
pack) mkdir -p "${OUT:?}" && pack ;;
smoke|tests|full)
  case "$cmd ${1:-}" in
    "tests "|"tests quick"|"tests compiled"|"tests all"|"tests -"*|smoke*|full*) ;;
    *) echo "tests [quick|compiled|all] [--redo]" >&2; exit 2 ;;
  esac
  call "$cmd" "$@" ;;
bring)
  from=${1:?bring DIR: the folder holding res.tgz}
  [ -f "$from/res.tgz" ] || { echo "no $from/res.tgz" >&2; exit 1; }
  mkdir -p .gpu-res outputs && cp "$from/res.tgz" .gpu-res/ || exit 1
  if ls "$from"/cache*.tgz >/dev/null 2>&1; then  # else the last ones that came back stay
    rm -f .gpu-res/cache*.tgz && cp "$from"/cache*.tgz .gpu-res/
  fi
  tar -xzf "$from/res.tgz" -C outputs --strip-components=1 --exclude=res/log.txt --exclude=res/CALL \
    --exclude=res/pack.txt || exit 1
  # the call's log (why a start failed, what the runner said) beside its evidence, calls appended in order
  call=$(tar -xzOf "$from/res.tgz" res/CALL 2>/dev/null)
  kind=$(sed -n 's/.* kind=\([^ ]*\).*/\1/p' <<< "$call"); short=$(sed -n 's/.* commit=\([^ ]*\).*/\1/p' <<< "$call")
  log=outputs/${kind:-unknown-gpu}/${short:-unknown-commit}/gpu-check.log
  mkdir -p "$(dirname "$log")" && { echo "==== $call"; cat "$from/log.txt" 2>/dev/null \
    || tar -xzOf "$from/res.tgz" res/log.txt; } >> "$log" && echo "$log: this call's log ($call)"
  tar -tzf "$from/res.tgz" | grep -E '^res/[^/]+/[^/]+/REPORT.md$' | sed 's|^res/|outputs/|'
  echo "for the next call carry .whl and .gpu-res"
  PYTHONPATH="$here/tools:$here/src" python3 -m gpuwindow carry  # the next call's carry, against its 64 MiB
  ;;
*) echo "usage: gpu-session.sh prepare | rehearse [STEP ...] | smoke | tests [quick|compiled|all] | full [--tests] [NAME ...] [--redo] | bring DIR" >&2
   exit 2 ;;
esac
