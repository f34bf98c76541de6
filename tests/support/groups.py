"""pytest-xdist (``-n 2``, ``-n auto``): what must stay in one worker, one test after another
(a plugin: tests/conftest.py names it in ``pytest_plugins``).

- ``-n`` alone distributes as ``--dist loadgroup`` (xdist's ``load`` ignores the groups);
- the tests of one SERIAL group run in one worker, in order: they share a fixed resource;
- the other tests of a file that uses a module- or class-scoped fixture run in one worker, so the
  fixture (often a whole ``cscore run``) is built once, not once per worker;
- a test's own ``@pytest.mark.xdist_group`` wins.

The lint group's tests are also marked ``lint`` (.ci/run runs them first: ``-m lint``)."""

from __future__ import annotations

from pathlib import Path

import pytest

SERIAL = {  # group: the files whose tests share it
    # one local cluster for the session (its daemons, /tmp/slurm-local and its locks)
    "slurm": {"test_slurm.py"},
    # the mkdocs build writes the generated pages into docs/ (benchmarks.md, reference/config.md)
    # that the other docs tests read; the config pins share the schema tests' composes (support/presets.py)
    "docs": {"test_docs.py", "test_config_schema.py", "test_pins_config.py"},
    # mypy's cache in .mypy_cache and the import-linter's: one writer at a time
    "lint": {"test_lint.py", "test_architecture.py"},
}
GROUP_OF = {name: group for group, names in SERIAL.items() for name in names}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): run in one pytest-xdist worker with its group")
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") in ("no", "load"):
        config.option.dist = "loadgroup"  # the controller: its scheduler
    worker = getattr(config, "workerinput", None)
    if worker and worker.get("cscore_loadgroup"):
        config.option.loadgroup = True  # a worker (it re-parses the command line): the groups in its node ids


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist's controller, for each worker: whether the run distributes by group."""
    node.workerinput["cscore_loadgroup"] = node.config.option.dist == "loadgroup"


def group_of(item) -> str | None:
    """The group of a test (None: any worker, test by test)."""
    path = Path(str(item.path))
    if path.name in GROUP_OF:
        return GROUP_OF[path.name]
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d and d[-1].scope in ("module", "class") for d in defs.values()):
        return path.name
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (group := group_of(item)):
            item.add_marker(pytest.mark.xdist_group(group))
        if GROUP_OF.get(Path(str(item.path)).name) == "lint":
            item.add_marker(pytest.mark.lint)
