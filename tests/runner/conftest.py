"""Fixtures the runner's tests share."""
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def nb_dir(tmp_path):
    """tmp/notebooks: a copy of tests/fixtures/notebooks/ ("tiny" ends ok, "failing" fails at its cell 3), free to
    edit and to run in."""
    d = tmp_path / "notebooks"
    shutil.copytree(FIXTURES / "notebooks", d)
    return d
