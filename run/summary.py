"""What ``cscore run`` prints at the end of a run (rich): the correlation tables, the signature,
per pass what it did, then anything worth a second look; the kind adds its own lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.progress import rate_text
from cscore.run.kinds.base import Loaded, MethodKind, Scored
from cscore.scorers.store.runner import PassReport

CONSOLE_WIDTH_OFF_TERMINAL = 160  # log files and SLURM output: do not squeeze tables to 80 columns


def make_console():
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, CONSOLE_WIDTH_OFF_TERMINAL))
    return console


def print_summary(console, run: RunConfig, kind: MethodKind, out_dir: Path, loaded: Loaded, scored: Scored, corr,
                  metrics) -> None:
    from rich.markup import escape

    from cscore.metaeval.report import rich_tables

    for t in rich_tables(corr, kind.title(run)):
        console.print(t)
    console.print(f"[dim]{escape(metrics['signature'])}[/]", soft_wrap=True)
    for line in [*pass_lines(scored), speed_line(metrics["speed"])]:
        if line is not None:
            console.print(line)
    weights = metrics["speed"]["weights"]  # this command's (run/stages.py::weights)
    if any(w != "loaded" for w in weights.values()):
        console.print("weights: " + ", ".join(f"{role} {w}" for role, w in weights.items()))
    rep = loaded.report
    console.print(f"{scored.n_truncated} truncated; {len(rep.excluded)} excluded and {len(rep.dropped)} dropped "
                  "while loading (rows in run.log and metrics.json)")
    n = len(scored.table)
    for c, k in metrics["nonfinite_scores"].items():
        if k:
            console.print(f"[yellow]{escape(c)}: {k} of {n} scores non-finite (left out of correlations)"
                          f"{escape(nonfinite_hint(run, c))}[/]")
    for style, text in kind.summary_lines(metrics):
        console.print(f"[{style}]{escape(text)}[/]")
    for c in [c for c in scored.table.columns if c.startswith(rundir.SCORE)]:
        values = pd.to_numeric(scored.table[c], errors="coerce")
        finite = values[np.isfinite(values)]
        if len(finite) > 1 and finite.nunique() == 1:
            console.print(f"[yellow]{escape(c)}: the same value for every item, so its correlations are "
                          "undefined (NaN)[/]")
    console.print(f"run directory: [bold]{escape(str(out_dir))}[/]")


def pass_lines(scored: Scored) -> list[str]:
    """Per pass: read from the cache (and how long it took to compute), or scored now, in how long."""
    n = len(scored.table)
    out = []
    for name, rep in scored.stats.reports.items():
        if rep.cached:
            was = f"computed earlier in {rep.seconds:.1f}s" if rep.seconds and np.isfinite(rep.seconds) \
                else "computed earlier"
            out.append(f"{name}: statistics of {n} items read from the cache in {rep.fetch_seconds:.2f}s "
                       f"(no forward pass; {was})")
        else:
            kept = getattr(rep, "resumed", 0)
            resumed = f"; {kept} more resumed from a checkpoint" if kept else ""
            if kept and isinstance(rep, PassReport) and rep.kept_text():
                resumed = f"; {kept} more done before this command ({rep.kept_text()})"
            out.append(f"{name}: scored {n - kept} items in {rep.seconds:.1f}s "
                       f"({rep.tokens / max(rep.seconds, 1e-9):,.0f} tokens/s{resumed})")
    return out


def speed_line(speed: dict) -> str | None:
    """The items this command scored over its scoring seconds (None: no speed of its own)."""
    rate, seconds = speed.get("samples_per_second"), speed.get("score_seconds")
    if rate is None or not seconds:
        return None
    return f"speed: {speed['items_scored']} items scored in {seconds:.1f}s, {rate_text(rate)} samples/s"


def nonfinite_hint(run: RunConfig, column: str) -> str:
    """Why the method's own scores may be non-finite by design (its module's ``nonfinite_hint``)."""
    from cscore.scorers import methods

    m = run.method
    if column.removeprefix(rundir.SCORE) != m.variant:
        return ""
    return methods.get(m.name).nonfinite_hint(m)
