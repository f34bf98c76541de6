"""Docs follow the code (issue 48 item 4): docs/architecture.md's layout names every module of the
package under its folder and no file that is not there, and no docstring names a module, path,
class or config key that does not exist (the checks: tests/support/docrefs.py)."""

from __future__ import annotations

import ast

from cscore.tests.support import REPO
from cscore.tests.support.docrefs import (
    NOT_CODE,
    code_refs,
    layout_block,
    layout_names,
    layout_problems,
    missing_refs,
    package_code,
    package_docstrings,
    package_modules,
)

PAGE = REPO / "docs" / "architecture.md"


def test_the_layout_names_every_module_under_its_folder_and_only_files_in_the_tree():
    modules = package_modules()
    assert len(modules) > 150 and "scorers/engine/engine.py" in modules and "run/kinds/base.py" in modules
    problems = layout_problems(PAGE.read_text(), modules)
    assert not problems, "docs/architecture.md's Layout:\n" + "\n".join(problems)


def test_the_layout_reader_places_names_in_their_folders():
    block = layout_block(PAGE.read_text())
    named = layout_names(block)
    assert named["run/kinds/token_pass.py"] == {"run/kinds"}
    assert named["scorers/api.py"] == {"scorers"}  # a module's own entry inside a folder
    assert named["run/workers.py"] == {"run", "scorers/store"}  # a path: named from the store's entry too
    assert named["errors.py"] == {""} and named["scripts/make_demo.py"] == {"scripts"}


def test_the_layout_check_finds_a_missing_file_and_an_unnamed_module(tmp_path):
    for path in ("cli/run.py", "cli/exits.py", "cli/pipeline/stages.py", "data/io.py", "errors.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    page = ("# A\n\n## Layout\n\n```\n"
            "cli/       the commands: run.py, gone.py\n"
            "  pipeline/  stages.py; data/io.py is read here\n"
            "data/      cli/exits.py named from another folder\n"
            "errors.py  the errors\n"
            "```\n")
    modules = ["cli/exits.py", "cli/pipeline/stages.py", "cli/run.py", "data/io.py", "errors.py"]
    assert layout_problems(page, modules, tmp_path) == [
        "named but not in the tree: cli/gone.py",
        "not named under cli/: cli/exits.py",  # only under data/
        "not named under data/: data/io.py",  # only under cli/pipeline/
    ]


def test_every_code_name_in_a_docstring_exists():
    """Every module path, ``ClassName``, ``CONSTANT``, ``module.attr`` and config key a docstring of
    the package names is in the tree, the package or the config schema."""
    code = package_code()
    texts = package_docstrings()
    assert "run/kinds/__init__.py" in texts and "scorers/api.py" in texts
    refs = [(where, name, ok) for where, docs in texts.items() for doc in docs for name, ok in code_refs(doc, code)]
    checked = {name for _, name, _ in refs}
    # the patterns still find what docstrings write: paths, classes, module attributes, config keys
    assert {"RunConfig", "runtime.max_length", "token_pass.TokenKind", "scorers/engine/align.py"} <= checked
    assert len(refs) > 300, len(refs)  # the checker still sees hundreds of names
    bad = sorted({f"{where}: {name}" for where, name, ok in refs if not ok})
    assert not bad, "docstrings name what does not exist:\n" + "\n".join(bad)


def test_the_docstring_checker_reports_names_that_do_not_exist():
    code = package_code()
    doc = ('The judge kind (``KIND = "judge"``: cd_judge), scored by the kind (scorers/kinds); '
           "``NoSuchClass`` and ``MethodKind``, ``RunConfig.passes`` and ``RunConfig.no_field``, "
           "``token_pass.TokenKind``, ``kinds.token_pass.TokenKind`` and ``token_pass.NoKind``, ``cli.no_such``, "
           "``runtime.max_length`` and "
           "``runtime.no_such_key``, ``method.gamma=0.2`` and ``method.gammma=0.2``, "
           "scorers/engine/engine.py and scorers/engine/gone.py, no_such_module.py and passes.py; "
           "not code: ``p.gamma``, ``meta.json``, ``CSCORE_DEBUG``, ``None``, outputs/multirun/<date>, "
           "conf/method/*.yaml, ``KendallLike`` (mt-metrics-eval's)")
    assert missing_refs(doc, code) == [
        "KIND", "NoSuchClass", "RunConfig.no_field", "token_pass.NoKind", "cli.no_such", "runtime.no_such_key",
        "method.gammma", "scorers/kinds", "scorers/engine/gone.py", "no_such_module.py"]


def test_each_name_let_through_is_named_by_a_docstring_and_not_defined_here():
    """The allow-list stays small and true: each entry is still written in a docstring (or the
    list would rot), and none is a name the package defines (it would need no entry)."""
    code = package_code()
    text = "\n".join(doc for docs in package_docstrings().values() for doc in docs)
    assert [name for name in sorted(NOT_CODE) if name not in text] == []
    top_level = {n.name for f in REPO.glob("**/*.py") if "tests" not in f.relative_to(REPO).parts
                 and ".venv" not in f.parts for n in ast.parse(f.read_text()).body
                 if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert [name for name in sorted(NOT_CODE) if name in top_level] == []
    assert len(NOT_CODE) < 25 and code.keys
