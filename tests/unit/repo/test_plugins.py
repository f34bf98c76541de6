"""One plugin convention (issue 40 item 3): every registry (methods, kinds, baselines, loaders) finds
its plugins by walking its package (``Registry.discover``), and the plugins of one registry are
independent of each other (no import chain either way, function-local imports counted) but for
what a plugin names in its ``builds_on``. Both are derived from the registries: a new method,
kind, baseline or loader is its module, its YAML and its tests, with no list edited anywhere."""

from __future__ import annotations

import importlib
import inspect
import itertools
import pkgutil
import sys
import textwrap

import grimp
import pytest

from cscore.registry import Registry
from cscore.tests.support import REPO


def registries() -> dict[str, tuple[Registry, str]]:
    """Each registry with the package it discovers."""
    from cscore.data import registry as loaders
    from cscore.run import kinds
    from cscore.scorers import baselines, methods

    return {"methods": (methods.METHODS, "cscore.scorers.methods"),
            "kinds": (kinds.registry(), "cscore.run.kinds"),
            "baselines": (baselines.BASELINES, "cscore.scorers.baselines"),
            "loaders": (loaders.LOADERS, "cscore.data")}


def violations(graph, reg: Registry) -> list[str]:
    """'a -> b' for each import chain from one plugin's module to another's that the importer does
    not name in ``builds_on`` (plugins that share a module are one)."""
    module = {name: cls.__module__ for name, cls in reg.items()}
    allowed = {(module[name], module[other]) for name, cls in reg.items() for other in cls.builds_on}
    out = []
    for a, b in itertools.permutations(sorted(set(module.values())), 2):
        if (a, b) not in allowed and graph.chain_exists(importer=a, imported=b):
            out.append(f"{a} -> {b}: {' -> '.join(graph.find_shortest_chain(importer=a, imported=b))}")
    return out


def unregistered(reg: Registry, package: str) -> list[str]:
    """Classes of the package with a ``name`` of their own, of the registry's base, that are not
    registered (a plugin module that forgot its decorator)."""
    registered = set(reg.values())
    out = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        module = sys.modules[f"{package}.{info.name}"]
        for _, cls in inspect.getmembers(module, inspect.isclass):
            own = cls.__module__ == module.__name__ and vars(cls).get("name")
            if own and issubclass(cls, reg.base) and not inspect.isabstract(cls) and cls not in registered:
                out.append(f"{info.name}.{cls.__name__}")
    return sorted(out)


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("cscore", cache_dir=None)


@pytest.mark.parametrize("what", ["methods", "kinds", "baselines", "loaders"])
def test_a_registry_discovers_its_package_and_every_plugin_there_is_registered(what):
    reg, package = registries()[what]
    assert reg.packages == [package]
    modules = {m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__)}
    assert {cls.__module__.removeprefix(package + ".") for cls in reg.values()} <= modules
    before = reg.items()
    reg.discover(package)  # a second walk imports nothing new and registers nothing twice
    assert reg.items() == before
    assert unregistered(reg, package) == []


@pytest.mark.parametrize("what", ["methods", "kinds", "baselines", "loaders"])
def test_the_plugins_of_a_registry_are_independent_but_for_what_they_build_on(what, graph):
    reg, _ = registries()[what]
    for name, cls in reg.items():
        assert set(cls.builds_on) <= set(reg.names()) - {name}, (name, cls.builds_on)
    assert violations(graph, reg) == []


def test_the_declared_dependencies_are_the_ones_the_code_has():
    reg = registries()
    assert {n: c.builds_on for n, c in reg["methods"][0].items() if c.builds_on} == {
        "cd_judge_released": ("cd_judge",), "cdm_classifier": ("cdm",)}
    assert {n: c.builds_on for n, c in reg["loaders"][0].items() if c.builds_on} == {
        "mqm22": ("mqm",), "mqm23": ("mqm",), "qags_cnndm": ("qags_xsum",)}
    assert not any(c.builds_on for _, c in [*reg["kinds"][0].items(), *reg["baselines"][0].items()])


def test_no_import_contract_lists_a_plugin_module():
    """pyproject's contracts name no plugin: independence is the registries' (above), nothing to add."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib

    plugins = {cls.__module__ for reg, _ in registries().values() for cls in reg.values()}
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    named = {m for c in contracts for key in ("modules", "source_modules", "forbidden_modules")
             for m in c.get(key, [])}
    assert plugins and not named & plugins, named & plugins


def test_a_new_plugin_module_is_discovered_and_its_stray_import_reported(tmp_path, monkeypatch):
    """A throwaway package: each plugin module registers itself when ``discover`` walks the package
    (no list names it), and an import of one plugin by another is a violation unless declared."""
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from cscore.registry import Registry

        class Widget:
            name = ""
            builds_on = ()

        WIDGETS = Registry("widget", Widget)
    """))
    (pkg / "shared.py").write_text("HELP = 1\n")
    (pkg / "gamma.py").write_text("from plugpkg import Widget\n\nclass Gamma(Widget):\n    name = 'gamma'\n")
    (pkg / "alpha.py").write_text(textwrap.dedent("""
        from plugpkg import WIDGETS, Widget
        from plugpkg.shared import HELP

        @WIDGETS
        class Alpha(Widget):
            name = "alpha"
    """))
    (pkg / "beta.py").write_text(textwrap.dedent("""
        from plugpkg import WIDGETS, Widget

        @WIDGETS
        class Beta(Widget):
            name = "beta"

            def f(self):
                from plugpkg import alpha  # a function-local import counts

                return alpha
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    plugpkg = importlib.import_module("plugpkg")
    try:
        plugpkg.WIDGETS.discover("plugpkg")
        assert plugpkg.WIDGETS.names() == ["alpha", "beta"] and plugpkg.WIDGETS.packages == ["plugpkg"]
        assert unregistered(plugpkg.WIDGETS, "plugpkg") == ["gamma.Gamma"]  # no decorator: reported
        graph = grimp.build_graph("plugpkg", cache_dir=None)
        assert violations(graph, plugpkg.WIDGETS) == ["plugpkg.beta -> plugpkg.alpha: plugpkg.beta -> plugpkg.alpha"]
        plugpkg.WIDGETS.get("beta").builds_on = ("alpha",)
        assert violations(graph, plugpkg.WIDGETS) == []
    finally:
        for name in [m for m in sys.modules if m == "plugpkg" or m.startswith("plugpkg.")]:
            del sys.modules[name]
