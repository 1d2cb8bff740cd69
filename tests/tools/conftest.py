"""The GPU window's tooling lives beside tools/gpu-session.sh (tools/gpuwindow), not in the package: importable here."""
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
