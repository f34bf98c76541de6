"""Docs that follow the code (issue 48 item 4): what docs/architecture.md's layout names against the
package's files, and the code names a docstring mentions (a path, a ``ClassName``, a ``module.attr``,
a config key such as ``runtime.max_length``) against what the package defines and the config schema.
Used by tests/unit/repo/test_docs.py and test_docs_follow_code.py."""

from __future__ import annotations

import ast
import builtins
import importlib
import itertools
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from cscore.tests.support import REPO

# ---------------------------------------------------------------- dotted ``cscore.`` names


def resolves(name: str) -> bool:
    """``name`` (``cscore.a.b.C.d``) is a module, or an attribute path under its longest module prefix."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def docstrings(source: str, name: str) -> list[str]:
    """The module's, every class's and every function's docstring in ``source``."""
    return [doc for node in ast.walk(ast.parse(source, filename=name))
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (doc := ast.get_docstring(node, clean=False))]


# ---------------------------------------------------------------- the package's files


def package_folders(root: Path = REPO) -> list[Path]:
    """The folders of pyproject's [tool.setuptools] packages (``cscore`` is the root)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return [root.joinpath(*p.split(".")[1:]) for p in packages]


def package_modules(root: Path = REPO) -> list[str]:
    """Every module of the package as a path from the root (``scorers/api.py``), ``__init__.py`` left out."""
    return sorted(f.relative_to(root).as_posix() for d in package_folders(root) for f in d.glob("*.py")
                  if f.name != "__init__.py")


# ---------------------------------------------------------------- docs/architecture.md's layout

FOLDER = re.compile(r"^( {0,4})(\w+)/ ")  # a folder's entry: at most 4 spaces in, then `name/ `
TOP_FILE = re.compile(r"^( {0,2})(\w+\.py) ")  # a module's own entry at the top or in a folder
FILE = re.compile(r"(?<![\w./-])((?:\w+/)*\w+\.py)(?![\w/])")  # a bare name: in its folder; a path: from the root


def layout_block(page: str) -> str:
    """The first code block of the page's ``## Layout`` section."""
    section = page.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1].split("\n", 1)[1]


def layout_names(block: str) -> dict[str, set[str]]:
    """{path named: folders whose entry names it} for the layout block. A folder's entry runs from its
    ``name/`` line (2 spaces per level) to the next entry; a bare ``x.py`` in it is that folder's
    module, ``a/b.py`` a path from the root, a file's own entry at the top (or in a folder) its module."""
    stack: list[str] = []  # the folders the current line is in, one per 2 spaces of its entry
    named: dict[str, set[str]] = {}
    for line in block.splitlines():
        if m := FOLDER.match(line):
            depth = len(m.group(1)) // 2
            stack = stack[:depth] + [m.group(2)]
        elif m := TOP_FILE.match(line):
            stack = stack[:len(m.group(1)) // 2]
        here = "/".join(stack)
        for name in FILE.findall(line):
            path = name if "/" in name else f"{here}/{name}".lstrip("/")
            named.setdefault(path, set()).add(here)
    return named


def layout_problems(page: str, modules: list[str], root: Path = REPO) -> list[str]:
    """What the layout gets wrong: a file it names that does not exist, a package module it does not
    name in its own folder's entry."""
    named = layout_names(layout_block(page))
    missing = [f"named but not in the tree: {p}" for p in sorted(named) if not (root / p).is_file()]
    unnamed = [f"not named under {m.rpartition('/')[0] or 'the top'}/: {m}" for m in modules
               if m.rpartition("/")[0] not in named.get(m, set())]
    return missing + unnamed


# ---------------------------------------------------------------- code names in docstrings

SPAN = re.compile(r"(`{1,2})([^`\n]+?)\1(?!`)")  # `x` or ``x``
PATH = re.compile(r"(?<![\w./$~<{-])((?:\w[\w-]*/)+[\w.*<>{}-]*)")  # a/b/, a/b.py, a/*.yaml
BARE_FILE = re.compile(r"(?<![\w./$~<{-])(\w+\.py)\b")
CAPITAL = re.compile(r"[A-Z]\w*")  # a ClassName or a CONSTANT
CONSTANT = re.compile(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+|[A-Z]{3,}")  # ENTRY_KIND, KIND; not T or PCE's 2 letters
# a span that is a name: alone, called, indexed, assigned or given on the command line
SPAN_NAME = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*\)|\[.*\])?(?: = .*|=\S*| -> .*)?")
FILE_NAME = re.compile(r"[\w.]+\.(?:py|json|jsonl|yaml|md|txt|csv|tsv|parquet|log|gguf|safetensors|bin|pt|png)")
RUN_FOLDERS = {"outputs"}  # paths a run writes (``outputs/multirun/<date>``), not files of the tree
# names and paths of other code that docstrings name, with where they are defined
NOT_CODE = {
    # mt-metrics-eval (google-research/mt-metrics-eval), whose statistics metaeval/ reproduces
    "AverageCorrelation", "AssignRanks", "KendallLike", "KendallVariants", "KendallWithTiesOpt",
    "PermutationSigDiff",
    # the released CD-judge code (scorers/judge/released.py reproduces it) and transformers' classes
    "llama_eval.py", "contrastive_decoding.py", "meta_eval_summeval.py",
    "RepetitionPenaltyLogitsProcessor", "PreTrainedTokenizerFast",
    # other libraries: torch's flex attention, gguf's reader, transformers' config attribute
    "BlockMask", "gguf.GGUFReader", "config._commit_hash",
}


@dataclass
class Code:
    """What the package defines, as a docstring may name it."""

    root: Path
    modules: dict[str, list[str]] = field(default_factory=dict)  # last part -> paths ('a/b.py', 'a/b/')
    top: dict[str, set[str]] = field(default_factory=dict)  # module path -> names at its top level
    defined: set[str] = field(default_factory=set)  # every class, function and assigned name, anywhere
    keys: set[str] = field(default_factory=set)  # config keys and every prefix of one
    folders: set[str] = field(default_factory=set)  # the folder names a path may start with
    files: set[str] = field(default_factory=set)  # every .py file name in the repository
    sections: set[str] = field(default_factory=set)  # the config keys that hold keys (``runtime``)
    strings: set[str] = field(default_factory=set)  # the package's string constants (``"CSCORE_DEBUG"``)


def assigned(body: list[ast.stmt]) -> set[str]:
    out = set()
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            out |= assigned(node.body) | assigned(getattr(node, "orelse", []))
    return out


def definitions(tree: ast.Module) -> set[str]:
    """Every class, function and assigned name of a module: its top level and each class body."""
    out = assigned(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            out |= assigned(node.body)
    return out - {a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names}


def config_keys() -> set[str]:
    """Every key of the composed config's schema (the configuration reference's rows) and its prefixes."""
    from cscore.cli.config_reference import config_reference_markdown

    keys = re.findall(r"^\| `([^`]+)` \|", config_reference_markdown(), re.M)
    return {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 2)}


@cache
def package_code(root: Path = REPO) -> Code:
    keys = config_keys()
    code = Code(root, keys=keys, sections={k.split(".")[0] for k in keys if "." in k})
    code.defined |= set(dir(builtins))
    for folder in package_folders(root):
        rel = folder.relative_to(root).as_posix()
        if rel != ".":
            code.modules.setdefault(folder.name, []).append(rel + "/")
            code.folders.add(folder.name)
        for f in sorted(folder.glob("*.py")):
            path = f.relative_to(root).as_posix()
            tree = ast.parse(f.read_text(), path)
            code.top[path] = assigned(tree.body)
            code.defined |= definitions(tree)
            code.strings |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                             and CONSTANT.fullmatch(n.value)}  # names it reads: CSCORE_DEBUG
            if f.name != "__init__.py":
                code.modules.setdefault(f.stem, []).append(path)
    code.folders |= {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
    code.files = {p.name for p in root.rglob("*.py") if ".venv" not in p.parts}
    return code


def path_exists(path: str, code: Code) -> bool:
    """``a/b/c.py`` (cut before a ``*`` or ``<name>`` part) is a file or folder from the root or from
    one of the package's folders (``store/cache.py`` in ``scorers/``)."""
    parts = re.split(r"/", path.rstrip("/.,:;"))
    fixed = "/".join(itertools.takewhile(lambda p: not re.search(r"[*<>{}]", p), parts))
    bases = [code.root] + package_folders(code.root)
    return not fixed or any((base / fixed).exists() for base in bases)


def module_attr(name: str, code: Code) -> bool | None:
    """``module.attr.attr`` (``kinds.token_pass.TokenKind``, its first part any module or package of
    that name): True or False, None when its first part names no module."""
    head, *rest = name.split(".")
    if head not in code.modules:
        return None
    for path in code.modules[head]:
        parts = list(rest)
        while parts and path.endswith("/") and (child := next(
                (p for p in code.modules.get(parts[0], []) if p in (f"{path}{parts[0]}.py", f"{path}{parts[0]}/")),
                None)):
            path, parts = child, parts[1:]
        top = code.top.get(path + "__init__.py" if path.endswith("/") else path, set())
        if not parts or (parts[0] in top and all(p in code.defined for p in parts[1:])):
            return True
    return False


def dotted_ok(name: str, code: Code) -> bool | None:
    """A dotted name's verdict. A module's attribute (``token_pass.TokenKind``) is found; else a name
    that starts with a config section (``runtime.max_length``) must be a config key; else one that
    starts with a module's name (a variable named after it: ``coordinator.todo()``) or a class
    (``RunConfig.passes``) must name attributes the package defines. None: none of these
    (``p.gamma``, a library's ``model.state_dict``)."""
    head, *rest = name.split(".")
    found = module_attr(name, code)
    if found:
        return True
    if head in code.sections:
        return name in code.keys
    if found is not None or (CAPITAL.fullmatch(head) and head in code.defined):
        return all(p in code.defined for p in rest)
    return None


def span_ref(span: str, code: Code) -> tuple[str, bool] | None:
    """The code name in one backticked span and whether the package has it; None when the span names
    none. The span is a name, a call, an assignment (``KIND = "judge"``) or an override
    (``runtime.shards=2``); a file name (``meta.json``) is no code name."""
    m = SPAN_NAME.fullmatch(span.strip())
    if not m or FILE_NAME.fullmatch(m.group(1)) or m.group(1) in NOT_CODE:
        return None
    name = m.group(1)
    if "." in name:
        verdict = dotted_ok(name, code)
        return None if verdict is None else (name, verdict)
    if CAPITAL.fullmatch(name) and (not name.isupper() or CONSTANT.fullmatch(name)):
        return name, name in code.defined or name in code.strings
    return None


def code_refs(doc: str, code: Code) -> list[tuple[str, bool]]:
    """Every code name in a docstring, with whether the package, the tree or the config schema has
    it: a name in backticks, a path that starts with a folder of the tree, a ``.py`` file's name."""
    spans = [ref for _, span in SPAN.findall(doc) if (ref := span_ref(span, code))]
    paths = [(p, path_exists(p, code)) for p in PATH.findall(doc)
             if p.split("/")[0] in code.folders - RUN_FOLDERS and p not in NOT_CODE]
    files = [(f, f in code.files) for f in BARE_FILE.findall(doc) if f not in NOT_CODE]
    return spans + paths + files


def missing_refs(doc: str, code: Code) -> list[str]:
    """The code names in a docstring that the package, the tree or the config schema lacks."""
    return [name for name, ok in code_refs(doc, code) if not ok]


def package_docstrings(root: Path = REPO) -> dict[str, list[str]]:
    """{module path: its docstrings} for every module of the package, ``__init__.py`` included."""
    files = sorted(f for d in package_folders(root) for f in d.glob("*.py"))
    return {f.relative_to(root).as_posix(): docstrings(f.read_text(), str(f)) for f in files}
