"""The six studies' verdicts, twice in a row on this machine: `perflab run` quiet, then beside two busy processes
(`perflab.runner.battery.background_load`), and what the two runs decided (issue 37: no contradictory verdicts, at
most 3 claims decided in one and not the other, "within noise" for at most 10% of the judged claims).

    python tools/two-runs.py --out outputs/verdicts/<commit>      # ~15 min on a 2-core CPU; writes TWO-RUNS.md

A judged claim: one with a verdict other than "not tested here". Decided: holds / partly holds / does not hold /
fixed. Contradictory: holds (or fixed, partly holds) in one run and does not hold in the other."""
import argparse
import subprocess
import sys
from pathlib import Path

from perflab.kit.results import read_rows
from perflab.runner.battery import background_load

DECIDED = {"holds", "fixed", "partly holds", "does not hold"}


def claims(folder: Path) -> dict:
    """{(study, claim key): row} of the latest execution of each study in `folder`'s results.jsonl."""
    rows = read_rows(folder)   # results.jsonl, or the results.jsonl.gz kept in outputs/verdicts/
    last = {}
    for r in rows:
        if r.get("kind") == "claim":
            last[(r.get("study"), r.get("key") or r["claim"])] = r
    return last


def side(v: str) -> str:
    return "yes" if v in ("holds", "fixed", "partly holds") else "no" if v == "does not hold" else v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--load", type=int, default=2)
    ap.add_argument("--compare-only", action="store_true", help="the two folders exist: compare them")
    args = ap.parse_args()
    runs = {"quiet": args.out / "quiet", "busy": args.out / "busy"}
    if not args.compare_only:
        for name, folder in runs.items():
            cmd = [str(Path(sys.executable).parent / "perflab"), "run", "--out", str(folder), "--no-progress"]
            print(f"{name}: {' '.join(cmd)}", flush=True)
            if name == "busy":
                with background_load(args.load):
                    subprocess.run(cmd, check=False)
            else:
                subprocess.run(cmd, check=False)
    a, b = claims(runs["quiet"]), claims(runs["busy"])
    lines = ["| study | claim | quiet | busy |", "|---|---|---|---|"]
    judged = contra = one_only = 0
    noise = {"quiet": 0, "busy": 0}
    for k in sorted(set(a) | set(b), key=str):
        va, vb = a.get(k, {}).get("verdict", "-"), b.get(k, {}).get("verdict", "-")
        if va == vb == "not tested here":
            continue
        judged += 1
        noise["quiet"] += va == "within noise"
        noise["busy"] += vb == "within noise"
        if va in DECIDED and vb in DECIDED and side(va) != side(vb):
            contra += 1
        if (va in DECIDED) != (vb in DECIDED):
            one_only += 1
        lines.append(f"| {k[0]} | {k[1]} | {va} | {vb} |")
    md = (f"# The six studies, twice in a row\n\nQuiet: `perflab run` alone; busy: the same beside {args.load} busy "
          f"processes. {judged} judged claims (a verdict other than \"not tested here\" in a run): contradictory "
          f"verdicts {contra}; decided in one run and not the other {one_only}; \"within noise\" quiet "
          f"{noise['quiet']} ({noise['quiet'] / max(judged, 1):.0%}), busy {noise['busy']} "
          f"({noise['busy'] / max(judged, 1):.0%}).\n\n" + "\n".join(lines) + "\n")
    (args.out / "TWO-RUNS.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
