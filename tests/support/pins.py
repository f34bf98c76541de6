"""The snapshot check of the pin tests (tests/integration/test_pins_*.py: the interfaces a refactor must keep)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest


def snapshot_checker(test_file: str):
    """check(path, text) for the ``pin_snapshot`` fixture; ``test_file``: the test's file name (the
    message says how to re-record)."""

    def check(path: Path, text: str) -> None:
        if os.environ.get("CSCORE_UPDATE_PINS") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.is_file():
            pytest.fail(f"no snapshot {path.name}: record it with "
                        f"CSCORE_UPDATE_PINS=1 python -m pytest {test_file}")
        want = path.read_text()
        if text != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                f"pinned {path.name}", "now"))
            pytest.fail(f"{path.name} changed (CSCORE_UPDATE_PINS=1 re-records it if intended):\n{diff}",
                        pytrace=False)

    return check
