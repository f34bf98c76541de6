"""``cscore cache ls|info|clear``: the on-disk store of per-token statistics."""

from __future__ import annotations

import argparse
import json
import sys
import time

from cscore.scorers.cache import StatsCache, human_bytes


def _when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "?"


def _temps(ts) -> str:
    return ",".join(f"{t:g}" for t in ts) if ts else "-"


def _num(n) -> str:
    return "?" if n is None else f"{n:,}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cscore cache", description="inspect or clear the statistics cache")
    sub = p.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=None,
                        help="cache directory (default: $CSCORE_CACHE/stats, i.e. ~/.cache/cscore/stats)")
    sub.add_parser("ls", parents=[common], help="list the entries")
    info = sub.add_parser("info", parents=[common], help="one entry in detail (checksum verified)")
    info.add_argument("key", help="key or unique key prefix")
    clear = sub.add_parser("clear", parents=[common], help="remove entries")
    clear.add_argument("keys", nargs="*", help="keys or unique key prefixes")
    clear.add_argument("--all", action="store_true", help="remove every entry")
    return p


def cmd_ls(cache: StatsCache, console) -> None:
    from rich.table import Table

    entries = cache.entries()
    if not entries:
        console.print(f"no cache entries in {cache.root}")
        return
    table = Table(title=f"statistics cache: {cache.root}")
    table.add_column("key", no_wrap=True)
    table.add_column("models", overflow="fold", min_width=20)
    table.add_column("items", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("temps", overflow="fold", min_width=7)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    for e in entries:
        models = "(broken)" if e["broken"] else "\n".join(e["models"]) or "-"
        table.add_row(e["key"][:12], models, _num(e["n_items"]), _num(e["n_tokens"]), _temps(e["temperatures"]),
                      human_bytes(e["size"]), _when(e["created"]))
    console.print(table)
    total = sum(e["size"] for e in entries)
    console.print(f"{len(entries)} entries, {human_bytes(total)} in total")


def cmd_info(cache: StatsCache, key: str, console) -> None:
    e = cache.info(key)
    status = "ok (checksum and shapes verified)" if e["ok"] else f"BROKEN: {e['error']}"
    lines = [
        ("key", e["key"]), ("path", e["path"]), ("status", status), ("size", human_bytes(e["size"])),
        ("created", _when(e["created"])), ("models", ", ".join(e["models"]) or "-"),
        ("heads", ", ".join(e["heads"]) or "-"), ("items", _num(e["n_items"])), ("tokens", _num(e["n_tokens"])),
        ("temperatures", _temps(e["temperatures"])),
    ]
    for name, value in lines:
        console.print(f"[bold]{name:>12}[/bold]  {value}", highlight=False, soft_wrap=True)
    for name in ("parts", "extra"):
        if e.get(name):
            console.print(f"[bold]{name}:[/bold]")
            console.print(json.dumps(e[name], indent=2, sort_keys=True), highlight=False, soft_wrap=True,
                          markup=False)


def cmd_clear(cache: StatsCache, keys: list[str], all_: bool, console) -> None:
    if all_ and keys:
        raise ValueError("give key prefixes or --all, not both")
    if not all_ and not keys:
        raise ValueError("give the key prefixes to remove, or --all")
    n = len(cache.keys()) if all_ else len({cache.resolve(k) for k in keys})
    freed = cache.clear(None if all_ else keys)
    console.print(f"removed {n} entr{'y' if n == 1 else 'ies'}, freed {human_bytes(freed)}")


def main(argv: list[str] | None = None) -> None:
    from rich.console import Console

    args = parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:  # piped: do not squeeze the table into 80 columns
        console = Console(width=max(console.width, 160))
    cache = StatsCache(args.root)
    try:
        if args.action == "ls":
            cmd_ls(cache, console)
        elif args.action == "info":
            cmd_info(cache, args.key, console)
        else:
            cmd_clear(cache, args.keys, args.all, console)
    except (KeyError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"cscore cache: {msg}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
