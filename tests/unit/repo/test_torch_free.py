"""The metaeval and data tests run without torch: the root conftest, the test modules and the
fixtures they use never load it (torch-using fixtures import it in their bodies, and only
scorer, engine and CLI tests ask for them). The commands that should answer at once (help, the
composed config, a missing folder, a bad value, ``cscore list``) import no torch, transformers or
matplotlib either."""

import subprocess
import sys

import pytest

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


# --- the commands that answer at once load no torch, transformers or matplotlib ---------------------

# cscore's main in a fresh interpreter; at exit (SystemExit included) the heavy modules it loaded, on stderr
COMMAND = """
import sys
from cscore.cli.main import main
try:
    main(sys.argv[1:])
finally:
    print("heavy loaded:", [m for m in ("torch", "transformers", "matplotlib") if m in sys.modules], file=sys.stderr)
"""
QUICK = {  # the command -> (its exit status, a line or phrase of what it prints)
    "run --help": (0, "cscore run --help-all"),
    "run --help-all": (0, "== Config =="),
    "run --cfg job": (0, "method:\n  name: contrast\n"),
    "report MISSING": (2, "MISSING does not exist: cscore report reads a run directory"),
    "report --paper cdm --out elsewhere MISSING": (2, "MISSING does not exist"),
    "list": (0, "datasets (data=<name>):\n  demo "),
    "run method.gamma=abc": (2, "method.gamma must be a number in [0, 1], got 'abc'"),
    "run methdo.gamma=0.1": (2, "no setting methdo.gamma: methdo is not a section of the config"),
    "cdm generate --help": (0, "usage: cscore cdm <generate|train>"),
    "t5score train --help": (0, "usage: cscore t5score train"),
    "data check --help": (0, "usage: cscore data export"),
    "rnu": (2, "unknown command 'rnu' (did you mean run?)"),
}


@pytest.mark.parametrize("command", list(QUICK))
def test_quick_commands_import_no_torch(tmp_path, command):
    """Each in a fresh process, as a user types it: the right answer and exit status, and none of
    torch, transformers, matplotlib imported (issue 42: they took 12-75 s under load for that)."""
    args = [str(tmp_path / "nothing") if a == "MISSING" else a for a in command.split()]
    res = subprocess.run([sys.executable, "-c", COMMAND, *args], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    code, says = QUICK[command]
    out = res.stdout + res.stderr
    assert res.returncode == code, out[-3000:]
    assert says.replace("MISSING", str(tmp_path / "nothing")) in out, out[-3000:]
    assert "heavy loaded: []" in res.stderr, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and not (tmp_path / "outputs").exists()


def test_run_help_is_short_and_names_every_config_group(tmp_path):
    """``cscore run --help``: under 40 lines of at most 100 columns (Hydra's help, ``--help-all``, is
    137 lines up to 293), every group of conf/ with every option, and where the details are."""
    from cscore.cli import run_help
    from cscore.cli.compose import conf_folder

    text = run_help.text()
    lines = text.splitlines()
    assert len(lines) < 40 and max(map(len, lines)) <= 100, (len(lines), max(map(len, lines)))
    words = set(text.replace(",", " ").split())
    for group in ("data", "pair", "method", "baseline", "prompt", "tracking", "hydra/launcher"):
        folder = conf_folder() / group
        options = [p.name.removesuffix(".yaml") for p in folder.glob("*.yaml")]
        assert group in words and options and set(options) <= words, group
    assert "schema" not in words  # the ConfigStore's schema nodes are no group a user picks
    for pointer in ("--help-all", "--cfg job", "docs/reference/config.md", "--hydra-help"):
        assert pointer in text


def test_report_reads_its_folders_before_it_parses():
    """The words that are folders, whatever the options around them (a flag takes no value; an
    abbreviated option is taken to have one, so its value is never read as a folder)."""
    from cscore.cli.report_cmd import folders_named

    assert folders_named(["a", "--paper", "cdm", "b", "--combined", "c", "--out=x", "d"]) == ["a", "b", "c", "d"]
    assert folders_named(["--seed", "-1", "a", "--", "-b"]) == ["a", "-b"]
    assert folders_named(["--comb", "a"]) == []  # left to argparse
