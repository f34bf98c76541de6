"""Google's WMT MQM expert annotations (google/wmt-mqm-human-evaluation), read from the raw error-level
TSVs (``.tsv``, ``.gz`` or an archive of one ``.tsv``) and scored into one example per (system, segment);
docs/datasets.md (MQM files). human.mqm = - the mean over raters of each rater's summed error weights (0 is
best; official weights, summed in tenths so sums are exact): 0 for
No-error / Neutral / HOTW-test or a ``zero_weight_categories`` category, 25 for ``Non-translation!``,
5 Major, 0.1 Minor ``Fluency/Punctuation``, 1 any other Minor."""

from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cscore.data import paths
from cscore.data.io import decode
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.prompts import LANGUAGES
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, validate

NAME = "mqm"
DATASET_DIR = "mqm"
DEFAULT_DIR, DEFAULT_FILE, DEFAULT_PAIR = "ted_zhen", "mqm_ted_zhen.tsv", "zh-en"  # in the shared mqm/ folder
ASPECT = HUMAN_PREFIX + "mqm"


@dataclass
class MqmScoring:
    """How MQM files are scored (mqm's options; WMT's loaders, ``wmt``, take them too)."""
    reference_system: str | None = option(doc="a system whose target serves as the reference (e.g. refA)")
    exclude_systems: list | None = option(doc="list of system names to leave out")
    exclude_references: bool = option(False, "drop human reference \"systems\" (ref-A, refB, ...) as WMT "
                                             "meta-evaluation does")
    zero_weight_categories: list | None = option(doc="MQM: error categories weighted 0 (e.g. [Other])")


@dataclass
class LangPair:
    lang_pair: str | None = option(doc="e.g. zh-en (needed for a file other than the default)")


@dataclass
class MqmOptions(MqmScoring, LangPair):
    """One file's options: its language pair, then how it is scored."""


# Weights in tenths, so that sums are exact.
MAJOR, MINOR, MINOR_PUNCT, NON_TRANSLATION = 50, 10, 1, 250
ZERO_SEVERITIES = {"no-error", "neutral", "hotw-test"}
SEVERITIES = {"major", "minor"} | ZERO_SEVERITIES
NO_ERROR = "no-error"
PUNCTUATION = "fluency/punctuation"
NON_TRANSLATION_CATEGORIES = {"non-translation!", "non-translation"}

REFERENCE_RE = re.compile(r"^(ref([-._]?[a-z0-9])?|human-[a-z](\.\d+)?)$", re.IGNORECASE)
SPAN_MARK = re.compile(r"</?v>")
LANG_SUFFIX = re.compile(r":([a-z]{2,3}-[a-z]{2,3})$")

COLUMN_NAMES = {  # role -> accepted header names, in order of preference
    "system": ("system",), "doc": ("doc",), "doc_seg": ("doc_id", "docSegId"), "seg": ("seg_id", "globalSegId"),
    "rater": ("rater",), "source": ("source",), "target": ("target",), "category": ("category",),
    "severity": ("severity",)}
OPTIONAL_ROLES = {"doc", "doc_seg"}


def _norm_label(value: str) -> str:
    """Severity / category for comparisons: lower case, no spaces around '/', stripped."""
    return re.sub(r"\s*/\s*", "/", value.strip()).casefold()


def clean_text(text: str) -> str:
    """Without <v>/</v> span marks, whitespace runs collapsed, ends stripped."""
    return " ".join(SPAN_MARK.sub("", text).split())


def error_weight_tenths(category: str, severity: str, zero_categories=frozenset()) -> int:
    """Weight of one error row, in tenths of a point (see the module docstring)."""
    sev, cat = _norm_label(severity), _norm_label(category)
    if sev in ZERO_SEVERITIES or cat in zero_categories:
        return 0
    if cat in NON_TRANSLATION_CATEGORIES:
        return NON_TRANSLATION
    if sev == "major":
        return MAJOR
    return MINOR_PUNCT if cat == PUNCTUATION else MINOR


def _alias(name: str) -> str:
    key = re.sub(r"[-._\s]", "", name).casefold()
    return "refa" if key == "ref" else key


def is_reference(system: str) -> bool:
    return bool(REFERENCE_RE.match(system.strip()))


def _seg_sort_key(seg: str):
    numeric = seg.isascii() and seg.isdigit() and len(seg) < 19  # "²" is a digit to isdigit, not to int
    return (0, int(seg), "") if numeric else (1, 0, seg)


def _scoring(options: MqmScoring) -> dict:
    """The options as ``_load_one`` reads them: the lists as lists of names (one name: a list of it)."""
    opts: dict[str, Any] = vars(options).copy()
    for key in ("exclude_systems", "zero_weight_categories"):
        value = opts[key]
        opts[key] = [] if value is None else [value] if isinstance(value, str) else [str(v) for v in value]
    opts["exclude_references"] = bool(opts["exclude_references"])
    return opts


def read_tsv_text(file: Path) -> tuple[str, str]:
    """(label used in messages, decoded text) of a .tsv, .gz or single-member tar archive."""
    name, label = file.name.lower(), str(file)
    try:
        if name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(file, "r:*") as tar:
                members = [m for m in tar.getmembers() if m.isfile()]
                chosen = [m for m in members if m.name.lower().endswith(".tsv")] or members
                if len(chosen) != 1:
                    raise DataError(f"{file}: expected one .tsv file in the archive, found "
                                    f"{[m.name for m in members] or 'none'}")
                label = f"{file}[{chosen[0].name}]"
                member = tar.extractfile(chosen[0])
                if member is None:  # only for a member that is not a regular file (filtered out above)
                    raise DataError(f"{label}: cannot read the archive member")
                raw = member.read()
        elif name.endswith(".gz"):
            with gzip.open(file, "rb") as fh:
                raw = fh.read()
        else:
            raw = file.read_bytes()
    except (tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError, OSError) as err:  # zlib: corrupt deflate data
        raise DataError(f"{file}: cannot read ({type(err).__name__}: {err})") from None
    return label, decode(raw, label)


def _columns(header: list[str], label: str) -> tuple[dict, int]:
    """role -> column index, and the number of columns (trailing '#' comment fields excluded)."""
    fields = [h.strip() for h in header]
    while fields and fields[-1].startswith("#"):
        fields.pop()
    found = {role: next((fields.index(n) for n in names if n in fields), None) for role, names in COLUMN_NAMES.items()}
    index = {role: i for role, i in found.items() if i is not None}
    missing = [" or ".join(COLUMN_NAMES[r]) for r in COLUMN_NAMES if r not in index and r not in OPTIONAL_ROLES]
    if missing:
        raise DataError(f"{label}:1: header lacks column(s) {missing}; header is {fields}")
    return index, len(fields)


def parse_rows(label: str, text: str) -> list[dict]:
    """One dict per error row: line, system, seg, rater, doc, source, target, category, severity."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DataError(f"{label}: empty file")
    index, n_cols = _columns(lines[0].rstrip("\r").split("\t"), label)
    rows = []
    for line_no, line in enumerate(lines[1:], 2):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != n_cols:
            raise DataError(f"{label}:{line_no}: expected {n_cols} tab-separated fields, found {len(f)}")
        rec: dict[str, Any] = {"line": line_no, "doc": None, **{role: f[i] for role, i in index.items()}}
        for role in ("system", "seg", "rater"):
            rec[role] = rec[role].strip()
            if not rec[role]:
                raise DataError(f"{label}:{line_no}: empty {COLUMN_NAMES[role][0]!r}")
        sev, cat = _norm_label(rec["severity"]), _norm_label(rec["category"])
        if sev not in SEVERITIES:
            raise DataError(f"{label}:{line_no}: unknown severity {rec['severity']!r}; expected one of "
                            "Major, Minor, No-error, Neutral, HOTW-test")
        if not cat:
            raise DataError(f"{label}:{line_no}: empty category")
        if (sev == NO_ERROR) != (cat == NO_ERROR):
            raise DataError(f"{label}:{line_no}: category {rec['category']!r} with severity {rec['severity']!r}; "
                            "No-error must be both the category and the severity")
        rows.append(rec)
    if not rows:
        raise DataError(f"{label}: no data rows")
    return rows


def lang_pair_from_name(name: str) -> str | None:
    """"zh-en" from a WMT file name such as ``mqm_ted_zhen.tsv``; None unless exactly one pair is named."""
    found = set()
    for part in re.split(r"[._\-\s]+", name.lower()):
        if not part.isalpha():
            continue
        for cut in range(2, len(part) - 1):
            src, tgt = part[:cut], part[cut:]
            if src != tgt and src in LANGUAGES and tgt in LANGUAGES:
                found.add(f"{src}-{tgt}")
    return found.pop() if len(found) == 1 else None


def infer_lang_pair(rows: list[dict], label: str, file: Path) -> str:
    """The pair named by a ``:xx-yy`` suffix of ``doc``, else by the file's or the archive member's name."""
    found = {m.group(1) for r in rows if r["doc"] and (m := LANG_SUFFIX.search(r["doc"].strip()))}
    if len(found) > 1:
        raise DataError(f"{label}: the doc column names several language pairs {sorted(found)}; one file holds "
                        f"one pair: set data.lang_pair=<xx-yy>")
    if found:
        return found.pop()
    member = label.removeprefix(str(file)).strip("[]")
    from_name = lang_pair_from_name(file.name) or (lang_pair_from_name(Path(member).name) if member else None)
    if from_name:
        return from_name
    raise DataError(f"{label}: cannot tell the language pair (no :xx-yy suffix on doc, none in the file name); "
                    "set data.lang_pair, e.g. data.lang_pair=zh-en")


def _span(lines: list[int]) -> str:
    lines = sorted(lines)
    shown = ",".join(map(str, lines[:5]))
    return f"line(s) {shown}{' ...' if len(lines) > 5 else ''}"


def _load_one(path, opts: dict):
    file = paths.resolve(str(path) if path else None, f"{DATASET_DIR}/{DEFAULT_DIR}", DEFAULT_FILE)
    label, text = read_tsv_text(file)
    rows = parse_rows(label, text)
    lang_pair = opts["lang_pair"] or (None if path else DEFAULT_PAIR) or infer_lang_pair(rows, label, file)
    zero = frozenset(_norm_label(c) for c in opts["zero_weight_categories"])

    pair_rows: defaultdict[tuple, list[dict]] = defaultdict(list)  # (system, seg) -> its error rows
    seg_rows: defaultdict[str, list[dict]] = defaultdict(list)
    for r in rows:
        pair_rows[(r["system"], r["seg"])].append(r)
        seg_rows[r["seg"]].append(r)
    targets = {key: {clean_text(r["target"]) for r in rs} for key, rs in pair_rows.items()}
    sources = {seg: {clean_text(r["source"]) for r in rs} for seg, rs in seg_rows.items()}
    systems = {s for s, _ in pair_rows}

    report = LoadReport(NAME, [label], len(pair_rows))
    ref_system, reference = _reference(label, opts, systems, targets)
    records = []
    for key in sorted(pair_rows, key=lambda k: (_seg_sort_key(k[1]), k[0])):
        system, seg = key
        row_id = f"{lang_pair}/{system}/{seg}"
        where = f"{label} {_span([r['line'] for r in pair_rows[key]])}"
        excluded = ("excluded system (data.exclude_systems)" if system in opts["exclude_systems"] else
                    f"used as the reference (data.reference_system={ref_system})" if system == ref_system else
                    "human reference excluded (data.exclude_references=true)"
                    if opts["exclude_references"] and is_reference(system) else None)
        if excluded:
            report.exclude(row_id, excluded, where)
            continue
        if len(sources[seg]) != 1:
            report.drop(row_id, "inconsistent source text", f"{label} {_span([r['line'] for r in seg_rows[seg]])}")
            continue
        if len(targets[key]) != 1:
            report.drop(row_id, "inconsistent target text", where)
            continue
        by_rater: defaultdict[str, int] = defaultdict(int)  # rater -> tenths
        for r in pair_rows[key]:
            by_rater[r["rater"]] += error_weight_tenths(r["category"], r["severity"], zero)
        score = -sum(by_rater.values()) / (10 * len(by_rater))
        records.append({
            "id": row_id, "group": f"{lang_pair}/{seg}", "system": system, "task": "translation",
            "source": next(iter(sources[seg])), "reference": reference.get(seg),
            "hypothesis": next(iter(targets[key])), "lang_pair": lang_pair, ASPECT: score + 0.0,
            "doc": next((r["doc"].strip() for r in pair_rows[key] if r["doc"] is not None), None),
            "n_raters": len(by_rater),
        })
    return records, report, systems


def _reference(label: str, opts: dict, systems: set, targets: dict) -> tuple[str | None, dict]:
    """(the system used as the reference or None, seg -> its target) for data.reference_system."""
    if not opts["reference_system"]:
        return None, {}
    wanted = str(opts["reference_system"])
    hits = [wanted] if wanted in systems else sorted(s for s in systems if _alias(s) == _alias(wanted))
    if len(hits) != 1:
        raise DataError(f"{label}: data.reference_system={wanted}: no such system (systems: {sorted(systems)})")
    ref = hits[0]
    return ref, {seg: next(iter(texts)) for (s, seg), texts in targets.items() if s == ref and len(texts) == 1}


def load(path: str | None = None, options: MqmOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    """One file (default: the shared TED zh-en file) -> (example table, report)."""
    options = options or MqmOptions()
    return load_many({options.lang_pair: path}, NAME, options)


def load_many(files: dict, dataset: str = NAME,
              scoring: MqmScoring | None = None) -> tuple[pd.DataFrame, LoadReport]:
    """Several files by language pair ({"zh-en": path, ...}; None: the pair the file names), concatenated, each
    scored with ``scoring``; every data.exclude_systems name must be a system of one."""
    if not files:
        raise DataError(f"{NAME}: load_many needs at least one {{lang_pair: path}} entry")
    opts = _scoring(scoring or MqmScoring())
    report = LoadReport(dataset)
    records, systems = [], set()
    for lang_pair, path in files.items():
        one, rep, sys_one = _load_one(path, {**opts, "lang_pair": lang_pair})
        records += one
        systems |= sys_one
        report.merge(rep)
    unknown = sorted(set(opts["exclude_systems"]) - systems)
    if unknown:
        raise DataError(f"{', '.join(report.source_files)}: data.exclude_systems names unknown system(s) {unknown} "
                        f"(systems: {sorted(systems)})")
    if not records:
        raise DataError(f"{NAME}: no usable rows left in {report.source_files} ({len(report.excluded)} excluded, "
                        f"{len(report.dropped)} dropped)")
    df = pd.DataFrame(records)
    df["n_raters"] = df["n_raters"].astype("int64")
    df = validate(df, report)
    kept = df.loc[df["system"].map(is_reference), "system"].value_counts()
    report.references = {s: int(kept[s]) for s in sorted(kept.index)}  # scored as systems: said on the console
    return df, report


@LOADERS
class Mqm(Loader):
    name = "mqm"
    task = "translation"
    Options = MqmOptions
    load = staticmethod(load)
