"""`perflab diagnose` against the four seed reports: diagnose every study's baseline and optimized steps
(`perflab.runner.reports.STUDIES`) into outputs/diagnose/<commit>/, then write docs/diagnose.md from those JSON files.

    .venv/bin/python tools/diagnose-reports.py            # record at this commit (~5 min on a 2-core CPU), then the page
    .venv/bin/python tools/diagnose-reports.py --page-only outputs/diagnose/<commit>   # the page again, no run
"""
import argparse
import subprocess
import sys
from pathlib import Path

from perflab.runner import reports

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page-only", type=Path, default=None, metavar="DIR", help="write the page from DIR's JSON")
    ap.add_argument("--only", default=None, help="record only this study (probe1d, prover, vae, latentwire)")
    args = ap.parse_args()
    if args.page_only:
        out = args.page_only
        reports.make_portable(out)   # no path of this machine in committed evidence
    else:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        out = ROOT / "outputs" / "diagnose" / commit
        studies = [s for s in reports.STUDIES if args.only in (None, s.key)]
        reports.record(out, studies, progress=lambda line: print(line, flush=True))
    (ROOT / "docs" / "diagnose.md").write_text(reports.page(out, out.name) + "\n")
    print("written:", ROOT / "docs" / "diagnose.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
