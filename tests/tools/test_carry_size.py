"""What travels to the GPU host stays small (issue 51 item 2): the tree (git's tracked and untracked-not-ignored files)
and the wheels of all three Pythons under BUDGET_MIB, the committed evidence compressed, the wheel set locked.

The budget: of the 64 MiB a call carries, CARRY_MARGIN_MIB (4) stay free, a compile-cache file that comes back takes
up to 16 and the last call's res.tgz with what `bring` unpacks ~4: 40 MiB for the tree and the wheels. At this
change they are 15.0 + 7.3 MiB. The tree's growth in its stored form (outputs' data gzipped) was ~1.2-1.5 MiB a day in
the project's first week (6.2 MiB at 7e47ac6 on Nov 23, 11.3 at 02a8512 on Nov 26, 15.0 now: git ls-tree sizes, data
files over 64 KiB counted gzipped), most of it code, notebooks and figures: the budget's 17.7 MiB of room is about two
weeks of that, not a year. A year at that rate does not fit in 64 MiB with any storage of the evidence, since the
code alone grew ~0.7 MiB a day: this test fails when the room is spent, and says what travels."""
from pathlib import Path

from gpuwindow import carry, evidence, wheels

ROOT = Path(__file__).resolve().parents[2]
BUDGET_MIB = 40  # the tree and the wheels (module doc)


def test_the_tree_and_the_wheels_stay_under_their_budget():
    tree = carry.carry(ROOT)["tree"]                                         # .whl and .gpu-res left out: carried
    locked = sum(size for size, _ in wheels.read_lock(ROOT / wheels.LOCK).values())
    total = (tree + locked) / 2**20
    assert total <= BUDGET_MIB, (f"tree {tree / 2**20:.1f} MiB + wheels {locked / 2**20:.1f} MiB = {total:.1f} MiB, "
                                 f"over {BUDGET_MIB} MiB: `python -m gpuwindow compact` the evidence, or carry less")


def test_no_bulky_evidence_is_committed_uncompressed():
    assert evidence.bulky(ROOT) == []


def test_the_lock_holds_each_pin_once_for_each_python():
    lock, pins = wheels.read_lock(ROOT / wheels.LOCK), wheels.read_pins(ROOT / wheels.PINS)
    for py in wheels.PYTHONS:
        tag = wheels.python_tag(py)
        files = [n.split("/")[-1] for n in lock if "/" not in n or n.startswith(tag + "/")]
        names = [wheels.norm(wheels.WHEEL.match(f)["name"]) for f in files]
        assert sorted(names) == sorted(pins), (py, set(names) ^ set(pins))   # every pin, one file each
        versions = {wheels.norm(wheels.WHEEL.match(f)["name"]): wheels.WHEEL.match(f)["version"] for f in files}
        assert versions == pins
