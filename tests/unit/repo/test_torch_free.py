"""The metaeval and data tests run without torch: the root conftest, the test modules and the
fixtures they use never load it (torch-using fixtures import it in their bodies, and only
scorer, engine and CLI tests ask for them)."""

import subprocess
import sys

from cscore.tests.support import TESTS

TORCH_FREE = ["test_metaeval.py", "test_metaeval_levels.py", "test_metaeval_uncertainty.py", "test_kernels.py",
              "test_data*.py"]

# pytest in a fresh interpreter, with a finder that notes who imports torch first (and lets the
# import go on) and a plugin that reports at the end of the session.
CHECK = """
import sys, traceback
import pytest

first = []


class NoteTorch:
    def find_spec(self, name, path=None, target=None):
        stack = traceback.extract_stack()
        # an import statement (not importlib.util.find_spec asking whether torch is installed)
        if name == "torch" and not first and len(stack) >= 3 and stack[-3].name == "_find_and_load_unlocked":
            first.append("".join(traceback.format_list(stack[-40:])))
        return None


class Report:
    def pytest_sessionfinish(self, session, exitstatus):
        print("torch imported:", "torch" in sys.modules)
        if first:
            print("first import of torch from:\\n" + first[0])


sys.meta_path.insert(0, NoteTorch())
sys.exit(pytest.main(sys.argv[1:], plugins=[Report()]))
"""


def test_metaeval_and_data_tests_never_import_torch(tmp_path):
    """Collection, every module-level import and every fixture of these tests (--setup-only:
    fixtures set up and torn down, test bodies not run; what the library imports when the data
    command runs is checked in test_data_wiring.py). Run from tmp_path: never the repo root on
    sys.path."""
    files = sorted({str(p) for pattern in TORCH_FREE for p in TESTS.rglob(pattern)})
    assert len(files) >= 11, files
    res = subprocess.run([sys.executable, "-c", CHECK, "--setup-only", "-q", "-p", "no:cacheprovider", *files],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert "torch imported: False" in res.stdout, res.stdout[-6000:]
