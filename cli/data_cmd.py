"""``cscore data export|check``: the validated example table, as it will be scored."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from cscore.cli.compose import composed, plain
from cscore.cli.exits import one_line_errors
from cscore.data.export import write_table
from cscore.data.registry import load_config
from cscore.errors import ConfigError
from cscore.rundir import HUMAN, human_columns

SHOWN_ROWS = 20  # rows left out that the card lists one by one


def export(cfg: DictConfig) -> None:
    if not cfg.get("out"):
        raise ConfigError("give the output: out=<file.parquet|file.jsonl|folder> (a folder: a datasets folder)")
    df, report = load_config(plain(cfg.data))
    out = Path(cfg.out)
    print(f"wrote {len(df)} rows to {out} ({write_table(df, out)}); {len(report.excluded)} excluded, "
          f"{len(report.dropped)} dropped while loading")
    for _, line in report.console_lines():
        print(f"  {line}")


def card(cfg: DictConfig) -> str:
    from transformers import AutoTokenizer

    from cscore.scorers.models import gguf

    df, report = load_config(plain(cfg.data))
    lines = [f"# dataset card: {cfg.data.name}", "", f"files: {', '.join(report.source_files)}", ""]
    counts = {"items": len(df), "systems": df["system"].nunique(), "groups": df["group"].nunique(),
              "tasks": ", ".join(sorted(df["task"].unique()))}
    if df["lang_pair"].notna().any():
        pairs = df["lang_pair"].value_counts().sort_index()
        counts["language pairs"] = ", ".join(f"{k} ({v})" for k, v in pairs.items())
    counts["with a reference text"] = int(df["reference"].notna().sum())
    refs = report.references  # human-reference "systems" in the table (MQM's ref, refB)
    counts["human-reference rows scored as systems"] = (
        f"{sum(refs.values())} ({', '.join(f'{s} {n}' for s, n in refs.items())}); "
        "data.exclude_references=true drops them" if refs else 0)
    lines += [f"- {k}: {v}" for k, v in counts.items()]
    lines += ["", "| aspect | n | min | mean | max | distinct values |", "|---|---:|---:|---:|---:|---:|"]
    for col in human_columns(df.columns):
        aspect, v = col.removeprefix(HUMAN), df[col].dropna()
        lines.append(f"| {aspect} | {len(v)} | {v.min():.4g} | {v.mean():.4g} | {v.max():.4g} | {v.nunique()} |")
    spec = cfg.get("tokenizer") or cfg.pair.expert.path
    tok = gguf.load_tokenizer(spec) if spec.startswith("gguf:") else AutoTokenizer.from_pretrained(spec)
    lines += ["", f"length in tokens ({spec}), without special tokens:", "",
              "| text | p5 | p50 | p95 | max |", "|---|---:|---:|---:|---:|"]
    for col in ("source", "reference", "hypothesis"):
        texts = df[col].dropna().astype(str)
        if len(texts):
            lengths = np.array([len(ids) for ids in tok(list(texts), add_special_tokens=False)["input_ids"]])
            q = np.percentile(lengths, [5, 50, 95, 100])
            lines.append(f"| {col} | " + " | ".join(f"{x:.0f}" for x in q) + " |")
    summary = report.summary()
    lines += ["", f"rows read: {summary['read']}; excluded: {summary['excluded']}; dropped: {summary['dropped']}; "
              f"values ignored: {summary['ignored_values']}"]
    lines += [f"- {r['kind']} {r['count']}: {r['reason']}" for r in report.reasons()]
    left_out = [d for d in report.details() if d["kind"] != "ignored"]
    lines += [f"  - {d['id']}: {d['kind']}, {d['reason']} {d['where']}".rstrip() for d in left_out[:SHOWN_ROWS]]
    if len(left_out) > SHOWN_ROWS:
        lines.append(f"  - ... {len(left_out) - SHOWN_ROWS} more")
    return "\n".join(lines)


USAGE = ("usage: cscore data export data=<name> [data.path=<file>] out=<file.parquet|.jsonl|folder>\n"
         "       cscore data check data=<name> [data.path=<file>] [tokenizer=<model spec>]")


def main(argv: list[str]) -> None:
    if argv[:1] == ["help"] or any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return
    if not argv or argv[0] not in ("export", "check"):
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    from hydra.errors import HydraException

    with one_line_errors(also=(FileNotFoundError, PermissionError, HydraException)):  # the error's exit_code
        cfg = composed("config", argv[1:])
        if argv[0] == "export":
            export(cfg)
        else:
            print(card(cfg))
