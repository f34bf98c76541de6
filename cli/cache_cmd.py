"""``cscore cache ls|info|clear``: the on-disk store of per-token statistics."""

from __future__ import annotations

import argparse
import json
import shutil
import textwrap
import time
from contextlib import suppress

from cscore.cli.exits import one_line_errors
from cscore.files import cache_root, disk_size
from cscore.metaeval import names
from cscore.scorers.models.identity import find_identities, identity_label
from cscore.scorers.store.cache import CacheEntryError, CacheError, StatsCache

SHOWN = {"temperatures", "heads", "model"}  # key parts the fixed columns already show
WHAT = {None: "token statistics", "judge": "judge statistics", "judge_decode": "decoded judge outputs"}  # meta kind
MODEL_DIRS = ("models", "gguf")  # under $CSCORE_CACHE: converted GGUF checkpoints, joined GGUF parts


def human_bytes(n: int | float | None) -> str:
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "?"


def _temps(ts) -> str:
    return ",".join(f"{t:g}" for t in ts) if ts else "-"


def _num(n) -> str:
    return "?" if n is None else f"{n:,}"


def summary(cache: StatsCache, key: str, meta: dict | None) -> dict:
    """What a listing shows of one entry, from its meta.json, unverified (``broken``: no readable meta.json)."""
    d = cache.path(key)
    out = {"key": key, "path": str(d), "size": disk_size(d), "created": None, "models": [], "temperatures": [],
           "n_items": None, "n_tokens": None, "heads": [], "broken": meta is None, "what": "?", "about": {}}
    if meta is None:
        with suppress(OSError):
            out["created"] = d.stat().st_mtime
        return out
    models = (meta.get("extra") or {}).get("models")
    if not isinstance(models, list) or not models:
        models = [identity_label(i) for i in find_identities(meta.get("parts"))]
    temps = sorted({float(t) for ts in (meta.get("temperatures") or {}).values() for t in ts})
    out.update(created=meta.get("created"), models=[str(m) for m in models], temperatures=temps,
               n_items=meta.get("n_items"), n_tokens=meta.get("n_tokens"), heads=meta.get("heads") or [],
               parts=meta.get("parts") or {}, what=WHAT.get(meta.get("kind"), str(meta.get("kind"))),
               about=meta.get("about") if isinstance(meta.get("about"), dict) else {})
    return out


def about_text(e: dict) -> str:
    """Which data and method the run that wrote the entry scored (meta.json's ``about``)."""
    about = e.get("about") or {}
    if not about:
        return "data and method not recorded (written before cscore kept them, or outside a run)"
    split = about.get("split")
    data = f"data {about.get('data', '?')}" + (f" (split {split})" if split not in (None, "all") else "")
    return f"{data}, method {about.get('method', '?')}"


def payload_of(meta: dict | None) -> type:
    """The payload type an entry holds, by its meta.json ``kind`` (none: token statistics)."""
    from cscore.scorers.engine.stats import TokenStats
    from cscore.scorers.judge.stats import DecodedPaths, JudgeStats

    kinds = {p.ENTRY_KIND: p for p in (TokenStats, JudgeStats, DecodedPaths)}
    return kinds.get((meta or {}).get("kind"), TokenStats)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cscore cache", description="inspect or clear the statistics cache")
    sub = p.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=None,
                        help="statistics directory (default: $CSCORE_STATS_CACHE, else $CSCORE_CACHE/stats, "
                             "else ~/.cache/cscore/stats)")
    sub.add_parser("ls", parents=[common], help="list the entries")
    info = sub.add_parser("info", parents=[common], help="one entry in detail (checksum verified)")
    info.add_argument("key", help="key or unique key prefix")
    clear = sub.add_parser("clear", parents=[common], help="remove entries")
    clear.add_argument("keys", nargs="*", help="keys or unique key prefixes")
    clear.add_argument("--all", action="store_true", help="remove every statistics entry")
    clear.add_argument("--models", action="store_true",
                       help="remove the converted GGUF models (rebuilt on next use, 20-50 s each)")
    return p


def differing(entries: list[dict]) -> list[str]:
    """Key parts (beyond models and temperatures) that tell apart entries of the same models."""
    by_models: dict[tuple, list[dict]] = {}
    for e in entries:
        by_models.setdefault(tuple(e["models"]), []).append(e.get("parts") or {})
    return sorted({k for parts in by_models.values() for k in names.differing(parts)} - SHOWN)


def _part(value) -> str:
    if isinstance(value, str) and len(value) > 16:
        return value[:12]  # a digest (e.g. ids: the exact token ids scored)
    return "-" if value is None else str(value)


def wrapped(text: str, width: int, indent: str = "    ", hang: str = "  ") -> list[str]:
    """``text`` in lines of at most ``width`` characters (a longer word, a path, stays whole), the lines after
    the first indented ``hang`` more."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + hang,
                         break_on_hyphens=False, break_long_words=False) or [indent]


def entry_lines(e: dict, extra: list[str], width: int) -> list[str]:
    """One entry as a few lines: key prefix, date, size, payload; what it was computed for; models; key parts."""
    head = f"{e['key'][:12]}  {_when(e['created'])}  {human_bytes(e['size'])}  {e['what']}"
    if e["broken"]:
        return [*wrapped(f"{head} (broken: no readable meta.json; cscore cache clear removes it)", width, ""), ""]
    lines = wrapped(head, width, "")
    lines += wrapped(about_text(e), width)
    lines += wrapped(f"{_num(e['n_items'])} items, {_num(e['n_tokens'])} tokens, temperatures "
                     f"{_temps(e['temperatures'])}", width)
    lines += wrapped("models: " + ("; ".join(e["models"]) or "-"), width)
    if extra:
        parts = e.get("parts") or {}
        lines += wrapped("key parts: " + ", ".join(f"{k}={_part(parts.get(k))}" for k in extra), width)
    return [*lines, ""]


def text_width(console) -> int:
    """The terminal's width (at least 60); 80 when the output is no terminal (a file, a pipe)."""
    return max(console.width, 60) if console.is_terminal else 80


def show(console, lines: list[str]) -> None:
    """Plain lines (no markup, no highlighting, not re-wrapped)."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def model_entries(with_locks: bool = False) -> list[dict]:
    """Converted GGUF checkpoints and joined GGUF files under the cache folder (lock files only ``with_locks``)."""
    folders = [(kind, cache_root() / kind) for kind in MODEL_DIRS]
    return [{"kind": kind, "name": p.name, "path": p, "size": disk_size(p), "created": p.stat().st_mtime}
            for kind, folder in folders if folder.is_dir() for p in sorted(folder.iterdir())
            if with_locks or not p.name.endswith(".lock")]


def cmd_ls(cache: StatsCache, console) -> None:
    """The statistics entries (oldest first), then the converted models."""
    entries = sorted((summary(cache, k, cache.meta(k)) for k in cache.keys()),
                     key=lambda e: (e["created"] or 0, e["key"]))
    width = text_width(console)
    if not entries:
        lines = [f"no statistics entries in {cache.root}"]
    else:
        extra = differing(entries)
        lines = [*wrapped(f"statistics cache: {cache.root}", width, ""), ""]
        for e in entries:
            lines += entry_lines(e, extra, width)
        lines += wrapped(f"{len(entries)} entries, {human_bytes(sum(e['size'] for e in entries))} in total (cscore "
                         "cache info KEY: one in detail; cscore cache clear KEY: remove it)", width, "")
    models = model_entries()
    if not models:
        lines.append(f"no converted models in {cache_root()}")
    else:
        lines += ["", f"converted models: {cache_root()}"]
        for e in models:
            lines += wrapped(f"{_when(e['created'])}  {human_bytes(e['size'])}  {e['kind']}/{e['name']}", width, "")
        lines += wrapped(f"{len(models)} files or folders, {human_bytes(sum(e['size'] for e in models))} in total "
                         "(cscore cache clear --models removes them; they are rebuilt on next use)", width, "")
    show(console, lines)


def cmd_info(cache: StatsCache, key_prefix: str, console) -> None:
    """One entry: its summary, the verification of its payload, its key parts and extra."""
    key = cache.resolve(key_prefix)
    meta = cache.meta(key)
    e, meta = summary(cache, key, meta), meta or {}
    try:
        cache.read(key, payload_of(meta))
        status = "ok (checksum and shapes verified)"
    except (FileNotFoundError, CacheEntryError, TypeError) as err:  # TypeError: a kind no payload type reads
        status = f"BROKEN: {err}"
    lines = [
        ("key", e["key"]), ("path", e["path"]), ("status", status), ("size", human_bytes(e["size"])),
        ("created", _when(e["created"])), ("holds", e["what"]), ("computed for", about_text(e)),
        ("models", ", ".join(e["models"]) or "-"),
        ("heads", ", ".join(e["heads"]) or "-"), ("items", _num(e["n_items"])), ("tokens", _num(e["n_tokens"])),
        ("temperatures", _temps(e["temperatures"])),
    ]
    width = text_width(console)
    for name, value in lines:
        show(console, wrapped(f"{name:>12}  {value}", width, "", " " * 14))
    for name in ("parts", "extra"):
        if meta.get(name):
            show(console, [f"{name}:"])
            for path, value in flat(meta[name]):
                show(console, wrapped(f"{json.dumps(path)}: {json.dumps(value, sort_keys=True)}", width, "  "))


def flat(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    """A nested dict as (dotted path, value) pairs, sorted, lists kept whole (for ``info``'s lines)."""
    out: list[tuple[str, object]] = []
    for k in sorted(d):
        v = d[k]
        if isinstance(v, dict) and v:
            out += flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def cmd_clear(cache: StatsCache, keys: list[str], all_: bool, console, models: bool = False) -> None:
    if models:
        entries = model_entries(with_locks=True)
        for e in entries:
            if e["path"].is_dir():
                shutil.rmtree(e["path"], ignore_errors=True)
            else:
                e["path"].unlink(missing_ok=True)
        n = sum(not e["name"].endswith(".lock") for e in entries)
        console.print(f"removed {n} converted model file(s) or folder(s), "
                      f"freed {human_bytes(sum(e['size'] for e in entries))}")
        if not all_ and not keys:
            return
    if all_ and keys:
        raise CacheError("give key prefixes or --all, not both")
    if not all_ and not keys:
        raise CacheError("give the key prefixes to remove, --all, or --models")
    n = len(cache.keys()) if all_ else len({cache.resolve(k) for k in keys})
    freed = cache.clear(None if all_ else keys)
    console.print(f"removed {n} entr{'y' if n == 1 else 'ies'}, freed {human_bytes(freed)}")


def main(argv: list[str] | None = None) -> None:
    from rich.console import Console

    args = parser().parse_args(argv)
    console = Console()
    cache = StatsCache(args.root)
    with one_line_errors(code=1, prefix="cscore cache"):  # a bug keeps its traceback
        if args.action == "ls":
            cmd_ls(cache, console)
        elif args.action == "info":
            cmd_info(cache, args.key, console)
        else:
            cmd_clear(cache, args.keys, args.all, console, args.models)


if __name__ == "__main__":
    main()
