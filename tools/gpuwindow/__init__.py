"""A lent GPU window's tooling, for a copy of the tree sent to a host that runs one command at a time
(`tools/gpu-session.sh` calls it; not part of the perflab package, which keeps `perflab gpu-check` and its deadline):

    carry      what a call carries (tree, .whl, .gpu-res) against the 64 MiB that travel; what comes back from $OUT
    cache      the run folders' compile caches packed to come back, newest first, within the next carry's room
    wheels     the pinned wheels for CPython 3.11-3.13, fetched and checked closed; the start's import check
    summary    the one-screen table a call ends with, from window.jsonl
    estimate   the window's calls estimated from what they run: params/gpu-smoke/ESTIMATE.md's table

    PYTHONPATH=tools:src python -m gpuwindow carry | summary ROOT | cache-budget RES | travel DEST | comeback OUT |
                                             pack-cache ROOT OUT | wheels fetch|check DIR | imports | estimate [--write]
"""
