"""The import architecture (issue 21): the import-linter contracts of pyproject.toml hold, and
scorers/, data/, metaeval/, config/, training/, run/ and cli/ have no import cycles (imports inside
functions count), nor have the scripts (each imports its siblings by their file name: ``scripts/``
is on the path of a script)."""

from __future__ import annotations

import ast
from pathlib import Path

import cscore
from cscore.tests.support import REPO

ROOT = Path(cscore.__file__).parent
NOT_PACKAGE = {"tests", "outputs", "scripts"}  # folders of the repository that are not part of cscore
NO_CYCLES = ("cscore.scorers", "cscore.data", "cscore.metaeval", "cscore.config", "cscore.training", "cscore.run",
             "cscore.cli")


def module_files(root: Path, name: str) -> dict[str, Path]:
    """Dotted module name -> file, for the package ``name`` whose folder is ``root``."""
    out = {}
    for f in root.rglob("*.py"):
        rel = f.relative_to(root)
        if rel.parts[0] in NOT_PACKAGE or any(p.startswith(".") for p in rel.parts):
            continue
        out[".".join((name, *rel.with_suffix("").parts)).removesuffix(".__init__")] = f
    return out


def imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The known modules one import statement names (``from a import b``: a.b when it is a module)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[:len(parts) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    else:
        return []
    out = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def import_graph(root: Path, name: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its code (functions included)."""
    files = module_files(root, name)
    graph = {m: set() for m in files}
    for m, f in files.items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            graph[m].update(imported(node, m, f.name == "__init__.py", set(files)))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycles_in_scorers_data_metaeval_cli():
    found = [c for c in cycles(import_graph(ROOT, "cscore")) if any(m.startswith(NO_CYCLES) for m in c)]
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def scripts_graph(folder: Path) -> dict[str, set[str]]:
    """Script -> the sibling scripts it imports anywhere in its code (functions included)."""
    files = {f.stem: f for f in sorted(folder.glob("*.py"))}
    return {name: {m for node in ast.walk(ast.parse(f.read_text(), str(f)))
                   for m in imported(node, name, False, set(files))} for name, f in files.items()}


def test_no_import_cycles_in_scripts():
    graph = scripts_graph(ROOT / "scripts")
    assert "reliability_checks" in graph["reliability_shards"]
    found = cycles(graph)
    assert not found, "import cycles in scripts/:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_scripts_cycle_finder_sees_sibling_imports(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import g\n    return g\n")
    (tmp_path / "c.py").write_text("import os\nimport a\n")
    assert scripts_graph(tmp_path) == {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(scripts_graph(tmp_path)) == [["a", "b"]]


def test_the_cycle_finder_sees_imports_inside_functions(tmp_path):
    """A package whose only cycle goes through a function-local relative import."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a\n")
    (pkg / "sub" / "a.py").write_text("from pkg.sub.b import f\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .a import g\n    return g\n")
    (pkg / "c.py").write_text("import pkg.sub.a\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.sub.a"} and graph["pkg.c"] == {"pkg.sub.a"}
    assert cycles(graph) == [["pkg.sub.a", "pkg.sub.b"]]
    (pkg / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert cycles(import_graph(pkg, "pkg")) == []


def test_import_linter_contracts_hold(capsys):
    """pyproject.toml's [tool.importlinter] contracts, checked on this copy of cscore."""
    from importlinter import api  # its public module; importing it sets import-linter up
    from importlinter.application.use_cases import lint_imports

    config = str(ROOT / "pyproject.toml")
    contracts = api.read_configuration(config)["contracts_options"]
    passed = lint_imports(config_filename=config, cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert passed, report
    assert f"Contracts: {len(contracts)} kept, 0 broken." in report, report


def test_every_sub_package_is_listed_for_setuptools():
    """pyproject lists the packages by hand (the root is the package): a new folder with an
    __init__.py must be there, or a non-editable install silently lacks it."""
    import pytest

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = REPO
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(("cscore", *p.parent.relative_to(root).parts)) for p in root.rglob("__init__.py")
             if not {"tests", "docs", ".git", "outputs"} & set(p.relative_to(root).parts)
             and not any(part.startswith(".") or part.endswith(".egg-info") for part in p.relative_to(root).parts)}
    assert found == listed


def private_imports(root: Path, name: str) -> list[str]:
    """``module: from other import _name`` for every import of a private name (``_x``, not ``__x__``)
    from another module of the package, anywhere in the code (functions included)."""
    files = module_files(root, name)
    out = []
    for m, f in files.items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not isinstance(node, ast.ImportFrom):
                continue
            targets = imported(node, m, f.name == "__init__.py", set(files))
            if not targets:
                continue
            for a in node.names:
                if a.name.startswith("_") and not a.name.endswith("__"):
                    out.append(f"{m}: from {'.' * node.level}{node.module or ''} import {a.name}")
    return sorted(out)


def test_no_private_name_is_imported_across_modules():
    found = private_imports(ROOT, "cscore")
    assert not found, "private names imported from another module (make them public):\n" + "\n".join(found)


def write_package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``tmp_path`` holding ``files`` ({name: source}) and an empty __init__."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (pkg / name).write_text(text)
    return pkg


def test_the_private_import_finder_sees_function_local_and_relative_imports(tmp_path):
    pkg = write_package(tmp_path, {"a.py": "_hidden = 1\n__all__ = ['_hidden']\n",
                                   "b.py": "import os\nfrom os import path\nfrom pkg.a import __all__\n"})
    assert private_imports(pkg, "pkg") == []
    (pkg / "b.py").write_text("def f():\n    from .a import _hidden\n    return _hidden\n")
    assert private_imports(pkg, "pkg") == ["pkg.b: from .a import _hidden"]
    (pkg / "b.py").write_text("from os.path import _joinrealpath\n")  # another package's: not ours
    assert private_imports(pkg, "pkg") == []


def test_the_pipeline_imports_no_command():
    """run sits below the commands (import-linter's cli contract says so too); checked here
    on the import graph that counts imports inside functions."""
    graph = import_graph(ROOT, "cscore")
    up = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("cscore.run")
                for t in targets if t.startswith("cscore.cli") and not t.startswith("cscore.run"))
    assert not up, "\n".join(up)


# the house, top to bottom (pyproject's layers contract): a package imports none above it
HOUSE = ("cli", "run", "training", "metaeval", "config", "scorers data")


def test_no_package_imports_one_above_it_even_inside_a_function():
    """cli > run > training > metaeval > config > scorers | data, on the import graph that counts
    imports inside functions (import-linter reads those too, but says less when it fails)."""
    graph = import_graph(ROOT, "cscore")
    rank = {f"cscore.{name}": level for level, names in enumerate(HOUSE) for name in names.split()}

    def level(module: str) -> int | None:
        return next((rank[p] for p in rank if module == p or module.startswith(p + ".")), None)

    up = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                if level(m) is not None and level(t) is not None and level(t) < level(m))
    assert not up, "\n".join(up)


# where scorers/ may read the environment: the model hub's settings, the statistics cache's root and
# the thread cap (OMP_NUM_THREADS, engine/threads.py), the native kernel's build (CC, its folder, its
# off switch: engine/native.py); sharding's variables (the worker's, SLURM's)
# are read by run/workers.py's ``coordinator`` alone
ENV_READERS = {"cscore.scorers.models.hub", "cscore.scorers.store.cache", "cscore.scorers.engine.threads",
               "cscore.scorers.engine.native"}


def environment_reads(root: Path, name: str) -> list[str]:
    """``module:line`` of each ``os.environ`` / ``os.getenv`` / ``os.putenv`` in the package ``name``."""
    out = []
    for m, f in module_files(root, name).items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "environb")
                    and isinstance(node.value, ast.Name) and node.value.id == "os") or (
                    isinstance(node, ast.ImportFrom) and node.module == "os"
                    and any(a.name in ("environ", "getenv") for a in node.names)):
                out.append(f"{m}:{node.lineno}")
    return sorted(out)


def test_scorers_read_the_environment_only_for_the_hub_the_cache_root_and_the_thread_cap():
    reads = [r for name in ("scorers", "config", "training") for r in environment_reads(ROOT / name, f"cscore.{name}")
             if r.split(":")[0] not in ENV_READERS]
    assert not reads, "\n".join(reads)


def test_the_environment_finder_sees_each_way_of_reading(tmp_path):
    pkg = write_package(tmp_path, {"a.py": "import os\n\ndef f():\n    return os.environ.get('X')\n",
                                   "b.py": "from os import getenv\n",
                                   "c.py": "import os\nx = os.getenv('Y')\ny = os.path.join('a')\n"})
    assert environment_reads(pkg, "pkg") == ["pkg.a:4", "pkg.b:1", "pkg.c:2"]
