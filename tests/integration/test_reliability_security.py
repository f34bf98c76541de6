"""Security: pickles only through the refusing unpickler (a malicious one runs nothing), no eval /
exec / unsafe loaders anywhere in the package, remote model code only with trust_remote_code set
explicitly (never from the command line), and runs that write only inside the directory named."""

from __future__ import annotations

import ast
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from cscore.data.io import read_pickle
from cscore.data.registry import load_examples
from cscore.data.schema import DataError
from cscore.tests.support import REPO

PACKAGE = REPO


class Evil:
    """Unpickling this runs ``os.system`` (the textbook malicious pickle)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("dataset", ["summeval", "qags_xsum"])
def test_malicious_pickle_runs_nothing(tmp_path, dataset):
    marker = tmp_path / "pwned"
    f = tmp_path / "data.pkl"
    f.write_bytes(pickle.dumps({"d1": {"src": Evil(marker), "sys_summs": {}}}))
    pickle.loads(f.read_bytes())  # the plain unpickler does run it: the pickle is really malicious
    assert marker.exists()
    marker.unlink()
    with pytest.raises(DataError, match=r"data\.pkl: refused to unpickle: the pickle asks for the global "
                                        r"(posix|os)\.system"):
        load_examples(dataset, str(f))
    assert not marker.exists()


def test_pickle_persistent_ids_and_nested_globals_are_refused(tmp_path):
    f = tmp_path / "p.pkl"

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return "ext" if obj == "secret" else None

    with open(f, "wb") as fh:
        P(fh).dump({"a": ["secret"]})
    with pytest.raises(DataError, match=r"persistent id \('ext'\)"):
        read_pickle(f)
    f.write_bytes(pickle.dumps({"a": [{"b": Path("/etc/passwd")}]}))  # a class deep inside plain data
    with pytest.raises(DataError, match=r"asks for the global pathlib\."):
        read_pickle(f)


def package_sources():
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE)
        if rel.parts[0] not in ("tests", "outputs", "build") and "egg-info" not in str(rel):
            yield rel, ast.parse(f.read_text(), str(f))


UNSAFE_CALLS = {"eval", "exec", "compile", "__import__"}
UNSAFE_ATTRS = {("pickle", "load"), ("pickle", "loads"), ("yaml", "load"), ("yaml", "unsafe_load"),
                ("torch", "load"), ("np", "load"), ("numpy", "load"), ("marshal", "loads"), ("dill", "load")}


def unsafe_uses(tree) -> list[str]:
    """Calls that can run code hidden in data or config: eval / exec, pickle / yaml / torch loaders,
    np.load with pickles allowed, subprocess with shell=True."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else None
        attr = (fn.value.id, fn.attr) if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) else None
        kwargs = {k.arg: k.value for k in node.keywords}
        if name in UNSAFE_CALLS:
            found.append(f"{name}() line {node.lineno}")
        elif attr in UNSAFE_ATTRS:
            pickles = kwargs.get("allow_pickle")
            if attr[1] == "load" and attr[0] in ("np", "numpy") and isinstance(pickles, ast.Constant) \
                    and pickles.value is False:
                continue  # np.load(..., allow_pickle=False)
            weights = kwargs.get("weights_only")
            if attr == ("torch", "load") and isinstance(weights, ast.Constant) and weights.value is True:
                continue
            found.append(f"{'.'.join(attr)}() line {node.lineno}")
        shell = kwargs.get("shell")
        if isinstance(shell, ast.Constant) and shell.value is True:
            found.append(f"shell=True line {node.lineno}")
    return found


def test_no_code_runs_from_data_or_config():
    """Only ``cscore.data.io.RefusingUnpickler`` reads pickles; config strings are never evaluated."""
    bad = {str(rel): uses for rel, tree in package_sources() if (uses := unsafe_uses(tree))}
    assert bad == {}


def test_the_scan_finds_what_it_looks_for():
    tree = ast.parse(
        "import pickle, numpy as np\neval(x)\npickle.loads(b)\nnp.load(f)\nnp.load(f, allow_pickle=False)\n"
        "subprocess.run(c, shell=True)\ntorch.load(p, weights_only=True)\n"
    )
    assert unsafe_uses(tree) == ["eval() line 2", "pickle.loads() line 3", "np.load() line 4", "shell=True line 6"]


def test_config_never_turns_on_remote_code():
    """No config file (so no command line) can set trust_remote_code; only the Python API can."""
    for f in (PACKAGE / "conf").rglob("*.yaml"):
        assert "trust_remote_code" not in f.read_text(), f


@pytest.fixture(scope="module")
def remote_code_model(tiny_dirs, tmp_path_factory):
    """The tiny expert, plus an ``auto_map`` pointing at a module that leaves a marker file when
    it is imported (what a malicious hub repository would ship)."""
    d = tmp_path_factory.mktemp("remote") / "model"
    shutil.copytree(tiny_dirs.expert, d)
    marker = d.parent / "remote_code_ran"
    (d / "evil_model.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "class EvilConfig(LlamaConfig):\n    pass\n"
        "class EvilLM(LlamaForCausalLM):\n    config_class = EvilConfig\n")
    config = json.loads((d / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil_model.EvilConfig", "AutoModelForCausalLM": "evil_model.EvilLM"}
    (d / "config.json").write_text(json.dumps(config))
    return d, marker


def test_remote_code_runs_only_when_asked(remote_code_model):
    from cscore.scorers.models.models import load_model

    d, marker = remote_code_model
    lm = load_model(str(d), device="cpu", dtype="float32")
    assert not marker.exists()
    assert type(lm.model).__name__ == "LlamaForCausalLM"
    load_model(str(d), device="cpu", dtype="float32", trust_remote_code=True)  # explicit: it does run
    assert marker.exists()
    marker.unlink()


@pytest.mark.slow
def test_run_writes_only_inside_the_named_directory(remote_code_model, tmp_path, cscore_cli, cscore_main):
    """A whole `cscore run` on the model with remote code: the code is not run, and every file the run
    writes is under hydra.run.dir / cache.dir (the working directory gets nothing)."""
    d, marker = remote_code_model
    data = tmp_path / "in" / "t.csv"
    data.parent.mkdir()
    data.write_text("source,hypothesis,q\nThe bridge opened.,A bridge opened.,3\nThe team won.,They lost.,1\n"
                    "Rain fell.,It rained.,2\n")
    work = tmp_path / "cwd"
    work.mkdir()
    res = cscore_cli("run", f"pair.expert.path={d}", "pair.amateur.path=null", "pair.amateur.early_exit=2",
                     "pair.name=evil", "runtime.progress=false", "data=table", f"data.path={data}",
                     "data.task=summarization", "data.columns.human=[q]", f"hydra.run.dir={tmp_path / 'named'}",
                     f"cache.dir={tmp_path / 'cache'}", cwd=work, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert not marker.exists()
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {"in", "named", "cache"}
    assert (tmp_path / "named" / "metrics.json").is_file() and not any(work.iterdir())
    # a run directory from elsewhere whose config.yaml names its data "../../..": the report stays in
    # <dir>/report (it wrote beside the run directory's parent)
    config = tmp_path / "named" / "config.yaml"
    config.write_text(config.read_text().replace("name: table", "name: ../../../escaped", 1))
    res = cscore_main("report", str(tmp_path / "named"), "--bootstrap", "10", "--permutations", "10", cwd=work)
    assert res.returncode == 0, res.stderr[-2000:]
    outside = [p for p in tmp_path.parent.rglob("*escaped*") if "report" not in p.relative_to(tmp_path.parent).parts]
    assert outside == [] and list((tmp_path / "named" / "report").glob("escaped_quality.md"))


def test_a_failed_run_removes_only_its_own_directory(tmp_path, cscore_main):
    """A run that fails while loading removes its new run directory, and the empty outputs/<date>/
    of the default layout, but never an (empty) folder of the user's above hydra.run.dir: it did."""
    mine = tmp_path / "user" / "experiments"
    mine.mkdir(parents=True)
    bad = tmp_path / "bad.csv"  # exists (a missing file stops before any run directory), fails when read
    bad.write_text("a,b\n1,2\n")
    args = ["run", "data=table", f"data.path={bad}", "data.task=summarization"]
    res = cscore_main(*args, f"hydra.run.dir={mine / 'run1'}", cwd=tmp_path)
    assert res.returncode == 2 and "bad.csv" in res.stderr, res.stderr
    assert mine.is_dir() and not (mine / "run1").exists()
    work = tmp_path / "work"
    work.mkdir()
    res = cscore_main(*args, cwd=work)  # the default outputs/<date>/<time>_... layout
    assert res.returncode == 2 and not any(work.iterdir())


def test_export_writes_only_what_out_names(tmp_path, cscore_main):
    work = tmp_path / "work"
    work.mkdir()
    res = cscore_main("data", "export", "data=demo", f"out={tmp_path / 'x' / 'demo.jsonl'}", cwd=work)
    assert res.returncode == 0, res.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["work", "x", "x/demo.jsonl"]
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    res = cscore_main("data", "export", "data=demo", f"out={folder}", cwd=work)
    assert res.returncode != 0 and "not empty" in res.stderr and res.stderr.count("\n") == 1
    assert [p.name for p in folder.iterdir()] == ["notes.txt"] and (folder / "notes.txt").read_text() == "keep me"
    assert not any(work.iterdir())
