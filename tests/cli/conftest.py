"""Private copies of the committed runs (commands write caches and continue runs in them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import LEARNED_RUN, TINY_RUN


@pytest.fixture
def tiny_run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY_RUN, tmp_path / "tiny-run"))


@pytest.fixture
def learned_run(tmp_path: Path) -> Path:
    """The learned copy model, without the ablation cache the committed folder may hold
    (so ``ablate`` measures instead of reading figures back)."""
    dest = Path(shutil.copytree(LEARNED_RUN, tmp_path / "learned-copy"))
    (dest / "ablation.json").unlink(missing_ok=True)
    return dest
