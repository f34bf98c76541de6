"""Static checks (issue 21): ruff is clean on the tree, mypy is clean on the typed packages (in the
fast tier: incremental, its cache in .mypy_cache), no function in the package (tests excluded) is
over 60 lines, and no function in the package takes more than 8 parameters, ``*args`` and
``**kwargs`` counted (issue 31: a pass's settings travel as one ``PassOptions``; issue 40: the whole
package, the Python API's keyword shim included: ``ModelPair.statistics`` takes a ``PassRequest``). The docs'
claims about what mypy covers match pyproject.toml."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cscore.tests.support import REPO

ROOT = REPO
MAX_LINES = 60
MAX_PARAMS = 8  # per function (self / cls not counted; *args and **kwargs counted)
# the Python API's one keyword shim (``ModelPair.statistics``: ``options=`` and its explicit
# keywords, then ``**overrides``, PassOptions fields as keywords); a function fixed leaves this set
# (the test says so), none joins it


def _mypy_settings() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def untyped_defs_packages(settings: dict) -> list[str]:
    """The packages whose unannotated function bodies mypy checks: all of ``packages`` when
    ``check_untyped_defs`` is on for all, else its overrides' (a package is named by its ``pkg``
    and ``pkg.*`` patterns, listed once)."""
    if settings.get("check_untyped_defs"):
        return sorted(settings["packages"])
    found = [m for o in settings.get("overrides", []) if o.get("check_untyped_defs")
             for m in ([o["module"]] if isinstance(o["module"], str) else o["module"])]
    return sorted({m.removesuffix(".*") for m in found})


def _tool(name: str, module: str, in_ci: bool) -> list[str]:
    """The command that runs a lint tool: its script, else ``python -m``; skip (fail under CI) if absent."""
    exe = shutil.which(name)
    if exe:
        return [exe]
    probe = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", module]
    if in_ci:
        pytest.fail(f"CI=true but {name} is missing: pip install -e '.[test]'")
    pytest.skip(f"{name} is not installed (pip install -e '.[test]')")


def test_ruff_clean(in_ci):
    cmd = _tool("ruff", "ruff", in_ci)
    out = subprocess.run([*cmd, "check", ".", "--output-format", "concise"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def _link_dir() -> Path:
    """A fixed folder (per checkout) holding a `cscore` symlink to the repository root, so mypy's
    cache keeps its paths from one run to the next."""
    where = Path(tempfile.gettempdir()) / f"cscore-mypy-{hashlib.sha1(str(ROOT).encode()).hexdigest()[:10]}"
    link = where / "cscore"
    if not (link.is_symlink() and link.resolve() == ROOT):
        where.mkdir(exist_ok=True)
        tmp = where / f"cscore.{os.getpid()}"
        tmp.symlink_to(ROOT, target_is_directory=True)
        os.replace(tmp, link)  # atomic: a concurrent run sees the old link or the new one
    return where


def test_mypy_clean(in_ci):
    """``packages`` of [tool.mypy]; incremental with its cache in .mypy_cache (the first run on a
    machine reads the installed libraries' types once: minutes on 2 cores; then seconds)."""
    cmd = _tool("mypy", "mypy", in_ci)
    env = {**os.environ, "MYPYPATH": ""}
    args = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")]
    out = subprocess.run([*cmd, *args], cwd=_link_dir(), capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"no issues found in \d+ source files", out.stdout), out.stdout


def _architecture_mypy_row() -> str:
    lines = (ROOT / "docs" / "architecture.md").read_text().splitlines()
    rows = [line for line in lines if line.startswith("| mypy |")]
    assert len(rows) == 1, "docs/architecture.md: one `| mypy |` row in the static checks table"
    return rows[0]


def test_the_docs_name_the_packages_mypy_checks():
    """docs/architecture.md's mypy row and its command by hand name exactly pyproject's packages, and
    its untyped-defs claim names exactly the packages with ``check_untyped_defs``."""
    settings = _mypy_settings()
    row = _architecture_mypy_row()
    checked, _, untyped = row.partition("check_untyped_defs")
    assert re.findall(r"`(cscore[\w.]*)`", checked) == settings["packages"]
    assert sorted(re.findall(r"`(cscore[\w.]*)`", untyped)) == untyped_defs_packages(settings)
    assert settings["packages"] == ["cscore"], "mypy checks the whole package"
    assert untyped_defs_packages(settings) == ["cscore"], "check_untyped_defs is on for the whole package"
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert "-p cscore" not in page, "the command by hand reads the packages from pyproject.toml"


def test_untyped_defs_packages_reads_both_patterns():
    settings = {"overrides": [{"module": ["cscore.data", "cscore.data.*"], "check_untyped_defs": True},
                              {"module": "cscore.x.*", "check_untyped_defs": True},
                              {"module": "cscore.y", "ignore_errors": True}]}
    assert untyped_defs_packages(settings) == ["cscore.data", "cscore.x"]
    assert untyped_defs_packages({**settings, "check_untyped_defs": True, "packages": ["cscore"]}) == ["cscore"]


def test_mypy_checks_the_installed_package_and_nothing_beside_it():
    """``packages`` is the package; ``exclude`` leaves out exactly the folders that are not in it
    (those [tool.setuptools] does not install: the scripts, tests, docs hooks and outputs)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = {p.split(".")[1] for p in config["tool"]["setuptools"]["packages"] if p.count(".") >= 1}
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
               and p.name != "site" and not p.name.endswith(".egg-info")}
    (pattern,) = _mypy_settings()["exclude"]
    left_out = {f for f in folders if re.search(pattern, f"cscore/{f}/x.py")}
    assert left_out == folders - installed, (left_out, folders - installed)


def _package_files() -> list[Path]:
    skip = {"tests", "outputs", "site", "docs", ".git", ".mypy_cache"}
    return [p for p in sorted(ROOT.rglob("*.py"))
            if not skip.intersection(p.relative_to(ROOT).parts[:1]) and ".venv" not in p.parts]


def long_functions(source: str, name: str) -> list[str]:
    """Every function (methods and nested ones included) in ``source`` longer than MAX_LINES lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - start + 1
            if length > MAX_LINES:
                found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_long_functions_detected():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert long_functions(f"def long():\n{body}\n", "m.py") == [f"m.py:1 long ({MAX_LINES + 1} lines)"]
    assert long_functions("def short():\n    return 1\n", "m.py") == []


def test_no_function_over_60_lines():
    files = _package_files()
    assert any(p.name == "engine.py" for p in files)
    found = [hit for p in files for hit in long_functions(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "functions over 60 lines:\n" + "\n".join(found)


def many_params(source: str, name: str) -> list[str]:
    """Every function (methods and nested ones included) in ``source`` with more than MAX_PARAMS
    parameters (positional, keyword-only, ``*args`` and ``**kwargs``; ``self`` / ``cls`` of a
    method not counted)."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            if named and named[0].arg in ("self", "cls"):
                named = named[1:]
            count = len(named) + (a.vararg is not None) + (a.kwarg is not None)
            if count > MAX_PARAMS:
                found.append(f"{name}:{node.lineno} {node.name} ({count} parameters)")
    return found


def test_many_params_detected():
    nine = ", ".join(f"a{i}" for i in range(MAX_PARAMS + 1))
    eight = ", ".join(f"a{i}" for i in range(MAX_PARAMS))
    assert many_params(f"def f({nine}):\n    pass\n", "m.py") == [f"m.py:1 f ({MAX_PARAMS + 1} parameters)"]
    assert many_params(f"def f(*, {nine}):\n    pass\n", "m.py") == [f"m.py:1 f ({MAX_PARAMS + 1} parameters)"]
    assert many_params(f"class C:\n    def f(self, {eight}):\n        pass\n", "m.py") == []
    assert many_params(f"class C:\n    def f(self, {eight}, **kw):\n        pass\n", "m.py") == [
        f"m.py:2 f ({MAX_PARAMS + 1} parameters)"]
    seven = ", ".join(f"a{i}" for i in range(MAX_PARAMS - 1))
    assert many_params(f"def f({seven}, *args, **kw):\n    pass\n", "m.py") == [
        f"m.py:1 f ({MAX_PARAMS + 1} parameters)"]
    assert many_params(f"def f({seven}, *args):\n    pass\n", "m.py") == []


def test_no_function_in_the_package_over_8_parameters():
    files = _package_files()
    assert {"loaded.py", "levels.py", "judge_released.py", "reliability.py"} <= {p.name for p in files}
    found = [hit for p in files for hit in many_params(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, f"functions over {MAX_PARAMS} parameters:\n" + "\n".join(found)


CATCH_ALLS = ("fields", "options", "overrides")  # settings as a keyword catch-all (issue 48)
FACADE = "scorers/api.py"  # the documented Python API: its keyword convenience builds the typed objects


def settings_catch_alls(source: str, name: str) -> list[str]:
    """Every function in ``source`` taking ``**fields``, ``**options`` or ``**overrides``."""
    return [f"{name}:{node.lineno} {node.name} (**{node.args.kwarg.arg})"
            for node in ast.walk(ast.parse(source, filename=name))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.kwarg is not None
            and node.args.kwarg.arg in CATCH_ALLS]


def test_settings_travel_typed_outside_the_api_facade():
    """One way into each function: a loader takes its ``Options``, a renderer its fields as a
    mapping; only the Python API facade takes keywords for them."""
    assert settings_catch_alls("def load(path=None, **options):\n    pass\n", "m.py") == ["m.py:1 load (**options)"]
    assert settings_catch_alls("def load(path=None, options=None, **kw):\n    pass\n", "m.py") == []
    files = [p for p in _package_files() if p.relative_to(ROOT).as_posix() != FACADE]
    assert {"registry.py", "summeval.py", "prompts.py"} <= {p.name for p in files}
    found = [hit for p in files for hit in settings_catch_alls(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "settings as a keyword catch-all outside " + FACADE + ":\n" + "\n".join(found)


def test_a_missing_tool_skips_or_fails_under_ci():
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        _tool("cscore-no-such-linter", "cscore_no_such_linter", in_ci=False)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        _tool("cscore-no-such-linter", "cscore_no_such_linter", in_ci=True)
