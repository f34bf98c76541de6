"""``cscore data export|check``: the validated example table, as it will be scored."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from cscore.data import load_examples
from cscore.data.schema import aspects, human_columns

from cscore.cli.run import DATA_KEYS  # noqa: E402


def compose(overrides: list[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def load(cfg: DictConfig):
    options = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if k not in DATA_KEYS}
    return load_examples(cfg.data.name, cfg.data.get("path"), **options)


def export(cfg: DictConfig) -> Path:
    if not cfg.get("out"):
        raise ValueError("give the output file: out=<file.parquet|file.jsonl>")
    df, report = load(cfg)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        df.to_parquet(out, index=False)
    elif out.suffix == ".jsonl":
        df.to_json(out, orient="records", lines=True, force_ascii=False)
    else:
        raise ValueError(f"out must end in .parquet or .jsonl, got {out.name!r}")
    print(f"wrote {len(df)} rows ({len(report.dropped)} dropped while loading) to {out}")
    return out


def token_lengths(texts, tokenizer) -> np.ndarray:
    enc = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return np.array([len(ids) for ids in enc])


def card(cfg: DictConfig) -> str:
    from transformers import AutoTokenizer

    from cscore.scorers.gguf import resolve_path

    df, report = load(cfg)
    lines = [f"# dataset card: {cfg.data.name}", "", f"files: {', '.join(report.source_files)}", ""]
    counts = {"items": len(df), "systems": df["system"].nunique(), "groups": df["group"].nunique(),
              "tasks": ", ".join(sorted(df["task"].unique()))}
    if df["lang_pair"].notna().any():
        counts["language pairs"] = ", ".join(f"{k} ({v})" for k, v in df["lang_pair"].value_counts().sort_index().items())
    counts["with reference"] = int(df["reference"].notna().sum())
    lines += [f"- {k}: {v}" for k, v in counts.items()]
    lines += ["", "| aspect | n | min | mean | max | distinct values |", "|---|---:|---:|---:|---:|---:|"]
    for aspect, col in zip(aspects(df), human_columns(df)):
        v = df[col].dropna()
        lines.append(f"| {aspect} | {len(v)} | {v.min():.4g} | {v.mean():.4g} | {v.max():.4g} | {v.nunique()} |")
    spec = cfg.get("tokenizer") or cfg.pair.expert.path
    tok = AutoTokenizer.from_pretrained(resolve_path(spec)[0])
    lines += ["", f"length in tokens ({spec}), without special tokens:", "",
              "| text | p5 | p50 | p95 | max |", "|---|---:|---:|---:|---:|"]
    for col in ("source", "reference", "hypothesis"):
        texts = df[col].dropna().astype(str)
        if len(texts):
            q = np.percentile(token_lengths(texts, tok), [5, 50, 95, 100])
            lines.append(f"| {col} | " + " | ".join(f"{x:.0f}" for x in q) + " |")
    summary = report.summary()
    lines += ["", f"values ignored (left out of a kept row's mean): {summary['ignored_values']}"]
    lines += [f"- {reason}: {n}" for reason, n in summary["ignored_by_reason"].items()]
    lines += ["", f"rows read: {summary['read']}; dropped: {summary['dropped']}"]
    lines += [f"- {reason}: {n}" for reason, n in summary["dropped_by_reason"].items()]
    for d in report.dropped[:20]:
        lines.append(f"  - {d['id']}: {d['reason']} {d['where']}".rstrip())
    if len(report.dropped) > 20:
        lines.append(f"  - ... {len(report.dropped) - 20} more")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in ("export", "check"):
        print("usage: cscore data export data=<name> [data.path=<file>] out=<file.parquet|.jsonl>\n"
              "       cscore data check data=<name> [data.path=<file>] [tokenizer=<model spec>]", file=sys.stderr)
        sys.exit(2)
    try:
        cfg = compose(argv[1:])
        if argv[0] == "export":
            export(cfg)
        else:
            print(card(cfg))
    except (ValueError, OSError, KeyError) as err:
        print(f"cscore: error: {err}", file=sys.stderr)
        sys.exit(1)
