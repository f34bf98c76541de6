"""What the tests share besides their fixtures (tests/conftest.py): the repository's root, the
tiny models (``models``), the float32 tolerances (``f32``) and the ``cscore`` command's runners
and arguments (``cli``). Imported as ``cscore.tests.support`` (the repository root is the package),
so the tests need no ``sys.path`` entry and work under ``--import-mode=importlib``."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the repository root (the cscore package)
TESTS = REPO / "tests"
