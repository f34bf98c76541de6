"""ContrastScore's (seed 000) lexical baseline rows of Tables 1-2, paper vs cscore side by side.

    python scripts/paper_baselines.py                       # runs into outputs/paper_baselines, prints the tables
    python scripts/paper_baselines.py --out DIR --only summeval-default qags-f

Table 1 gives ROUGE-1/2/L Pearson on QAGS-XSum factuality and SummEval's four aspects (AVG = the
mean of the five); Table 2 BLEU / chrF on MQM22 and MQM23. Each configuration below is one
``cscore run method=baseline baseline=rouge`` (``runtime.threads=1``; a finished run directory is
reused). The correlation is the run's own table: Pearson over every row ("segment" level, as the
released ``run_experiment.py`` correlates: pandas ``corr`` over all rows); the item (per document,
averaged) and system levels are added from each run's scores.parquet with ``metaeval.levels``.

No Table 2 cell runs on the shared data: MQM22 is not there, and the shared WMT23 zh-en file (side by
side MQM, 377 segments x 10 systems) holds no reference translation, which BLEU and chrF need."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TYPES = ("rouge1", "rouge2", "rougeL")
COLUMNS = (("qags_xsum", "fact"), ("summeval", "coherence"), ("summeval", "consistency"), ("summeval", "fluency"),
           ("summeval", "relevance"))
# ContrastScore Table 1, Baseline rows: QAGS-XSum factuality, SummEval coh / con / flu / rel
PAPER = {"rouge1": (0.055, 0.238, 0.079, 0.071, 0.330), "rouge2": (0.121, 0.164, 0.073, 0.066, 0.229),
         "rougeL": (0.075, 0.207, 0.071, 0.078, 0.303)}
PAPER_AVG = {"rouge1": 0.154, "rouge2": 0.130, "rougeL": 0.147}
R = "baseline.rouge."
# name -> (data, what it is, overrides)
CONFIGS = {
    "summeval-default": ("summeval", "all 11 references, the best F (score_multi); F1 (cscore's default)", []),
    "summeval-first-f": ("summeval", "the first reference only; F1", [f"{R}references=first"]),
    "summeval-mean-f": ("summeval", "F1 averaged over the 11 references", [f"{R}multi=mean"]),
    "summeval-mean-recall": ("summeval", "recall averaged over the 11 references",
                             [f"{R}multi=mean", f"{R}measure=recall"]),
    "summeval-first-recall": ("summeval", "the first reference only; recall",
                              [f"{R}references=first", f"{R}measure=recall"]),
    "summeval-mean-precision": ("summeval", "precision averaged over the 11 references",
                                [f"{R}multi=mean", f"{R}measure=precision"]),
    "summeval-nostem": ("summeval", "all references, best F; F1; no stemmer", [f"{R}use_stemmer=false"]),
    "qags-f": ("qags_xsum", "against the article (no reference exists); F1", [f"{R}against=source"]),
    "qags-recall": ("qags_xsum", "against the article; recall", [f"{R}against=source", f"{R}measure=recall"]),
    "qags-precision": ("qags_xsum", "against the article; precision",
                       [f"{R}against=source", f"{R}measure=precision"]),
    "qags-f-nostem": ("qags_xsum", "against the article; F1; no stemmer",
                      [f"{R}against=source", f"{R}use_stemmer=false"]),
}
DEFAULT = {"summeval": "summeval-default", "qags_xsum": "qags-f"}


def run(name: str, out: Path) -> Path:
    data, _, overrides = CONFIGS[name]
    folder = out / name
    if not (folder / "metrics.json").is_file():
        cmd = [sys.executable, "-m", "cscore.cli.main", "run", "method=baseline", "baseline=rouge", f"data={data}",
               "runtime.threads=1", "runtime.progress=false", f"hydra.run.dir={folder}", *overrides]
        print("$ cscore " + " ".join(cmd[4:]), file=sys.stderr, flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return folder


def correlations(folder: Path, levels: tuple[str, ...]) -> dict:
    """{(type, aspect, level): Pearson} of one run."""
    from cscore.metaeval.levels import correlate_at

    scores = pd.read_parquet(folder / "scores.parquet")
    humans = [c for c in scores.columns if c.startswith("human.")]
    return {(t, h.removeprefix("human."), lv): correlate_at(scores, f"score.{t}", h, lv)["value"]
            for t in TYPES for h in humans for lv in levels}


def fmt(x) -> str:
    return "" if x is None else f"{x:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "outputs" / "paper_baselines")
    ap.add_argument("--only", nargs="*", choices=sorted(CONFIGS), help="run these configurations only")
    args = ap.parse_args(argv)
    names = args.only or list(CONFIGS)
    got = {}
    for name in names:
        levels = ("segment", "item", "system") if CONFIGS[name][0] == "summeval" else ("segment",)
        got[name] = correlations(run(name, args.out), levels)

    head = "| ROUGE | row | QAGS-XSum fact | coherence | consistency | fluency | relevance | AVG |"
    print("Table 1, Baseline rows: paper vs cscore's defaults (Pearson over all rows)\n")
    print(head + "\n|---|---|" + "---:|" * 6)
    for t in TYPES:
        print(f"| {t} | paper | " + " | ".join(fmt(v) for v in PAPER[t]) + f" | {fmt(PAPER_AVG[t])} |")
        cells = [got.get(DEFAULT[d], {}).get((t, a, "segment")) for d, a in COLUMNS]
        avg = sum(cells) / len(cells) if all(c is not None for c in cells) else None
        print(f"| {t} | cscore | " + " | ".join(fmt(c) for c in cells) + f" | {fmt(avg)} |")
    print("\nEvery configuration tried (Pearson; |diff| = the largest distance from the paper's cells of that data)\n")
    print("| configuration | level | ROUGE | " + " | ".join(a for _, a in COLUMNS) + " | max abs diff |")
    print("|---|---|---|" + "---:|" * 6)
    for name in names:
        data, what, _ = CONFIGS[name]
        levels = sorted({k[2] for k in got[name]}, key=("segment", "item", "system").index)
        for lv in levels:
            for t in TYPES:
                cells = [got[name].get((t, a, lv)) if d == data else None for d, a in COLUMNS]
                diff = max(abs(c - p) for c, p in zip(cells, PAPER[t]) if c is not None)
                print(f"| `{name}`: {what} | {lv} | {t} | " + " | ".join(fmt(c) for c in cells) + f" | {diff:.3f} |")
    print("\nTable 2 (BLEU, chrF on MQM22 / MQM23): no cell runs on the shared data (MQM22 is not there; the "
          "WMT23 zh-en file has no reference translation).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
