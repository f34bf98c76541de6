"""``cscore report <run or multirun dir> [more dirs]``: paper-style tables and plots from finished runs.

Judge runs (``cd_judge``, ``cd_judge_released``) get the CD-judge paper's tables instead
(``metaeval.judge``: (lambda, t) chosen on dev, correlations by score range, chosen
hyper-parameters, range bias, invalid outputs) and plots (``metaeval.judge_plots``); other runs in
the same folder get the usual tables."""

from __future__ import annotations

import argparse
from pathlib import Path

FLAGS = ("--combined", "--spa", "-h", "--help")  # the options that take no value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not the usage block
        self.exit(2, f"cscore: error: {message} (cscore report --help for the options)\n")


def folders_named(argv: list[str]) -> list[str]:
    """The words of ``argv`` that are neither an option nor an option's value: the folders (an
    abbreviated flag is taken to have a value)."""
    out: list[str] = []
    value_next = False
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i + 1:]
        if value_next:
            value_next = False
        elif arg.startswith("-") and len(arg) > 1:
            value_next = "=" not in arg and arg not in FLAGS
        else:
            out.append(arg)
    return out


def spec_from_args(args, preset: dict):
    """The report's statistic from the command line; ``preset`` (``--paper P``'s) fills in what is not given,
    else Pearson at the segment level, resampling groups."""
    from cscore.metaeval.spec import Spec

    own = args.correlation is not None or args.kendall is not None
    given = vars(args) if own else preset
    correlation, variant = given.get("correlation"), given.get("kendall")
    kind = correlation or ("kendall" if variant is not None else "pearson")
    level = args.level or preset.get("level", "segment")
    average = args.average or (preset.get("average") if not own and level in ("item", "system_grouped") else None)
    return Spec(level, kind, variant, args.bootstrap, args.permutations, args.seed, args.alpha,
                args.kendall_threshold, resample=args.resample or preset.get("resample", "groups"),
                accuracy=args.accuracy, average=average or "macro", ties=args.ties)


def spa_from_args(args, preset: dict) -> tuple[int, int] | None:
    """(permutations, seed) of the soft pairwise accuracy tables, or None when neither ``--spa`` nor the
    ``--paper`` ``preset`` asks for them (a ConfigError for an ``--spa-*`` option then, or a bad value)."""
    from cscore.errors import ConfigError
    from cscore.metaeval.spa import PERMUTATIONS, SEED

    on = args.spa or bool(preset.get("spa"))
    given = [f"--spa-{n}" for n in ("permutations", "seed") if getattr(args, f"spa_{n}") is not None]
    if not on:
        if given:
            raise ConfigError(f"{given[0]} applies with --spa (or a --paper preset that has it)")
        return None
    permutations = PERMUTATIONS if args.spa_permutations is None else args.spa_permutations
    seed = SEED if args.spa_seed is None else args.spa_seed
    if permutations < 1 or seed < 0:
        raise ConfigError(f"--spa-permutations must be >= 1 and --spa-seed >= 0, got {permutations} and {seed}")
    return permutations, seed


def parser() -> argparse.ArgumentParser:
    from cscore.metaeval.correlation import CORRELATIONS
    from cscore.metaeval.spec import KENDALL_LIKE_THRESHOLD, PAPERS

    ap = _Parser(prog="cscore report", description=__doc__)
    ap.add_argument("path", type=Path, nargs="+",
                    help="a run directory, a multirun directory or any folder holding runs; several make one report "
                         "over all their runs (one found under two of them counts once)")
    ap.add_argument("--paper", default=None, choices=list(PAPERS),
                    help="the statistic that paper's tables report (options given here win): contrastscore = Pearson "
                         "+ the all-datasets table with Table 1's AVG; cdm = Spearman; cdjudge = Spearman, bootstrap "
                         "over summaries; t5score = --level item --kendall like --average micro (WMT20 seg-k); "
                         "contrastscore and t5score also --spa")
    ap.add_argument("--level", default=None, choices=["segment", "item", "system_grouped", "system"],
                    help="default: segment (or the --paper preset's)")
    ap.add_argument("--correlation", default=None, choices=list(CORRELATIONS),
                    help="default: pearson, or kendall when --kendall is given")
    ap.add_argument("--kendall", default=None,
                    help="Kendall variant: b (default), c, 23, acc23, like; implies --correlation kendall")
    ap.add_argument("--kendall-threshold", type=float, default=None,
                    help="--kendall like: count only pairs whose human scores differ by at least this much "
                         f"(default {KENDALL_LIKE_THRESHOLD:g}, WMT DA points on 0-100; e.g. 1 for 1-5 ratings)")
    ap.add_argument("--average", default=None,
                    help="--level item / system_grouped: macro (the plain mean of the per-group values; the default) "
                         "or micro (weighted as mt-metrics-eval's macro=False: --kendall like pools the pairs of "
                         "all groups, WMT20's seg-k)")
    ap.add_argument("--ties", default=None,
                    help="--kendall acc23 / 23: calibrated (the metric-tie epsilon that maximises the value, WMT23 / "
                         "mt-metrics-eval KendallWithTiesOpt; acc23's default) or exact (epsilon 0; 23's default)")
    ap.add_argument("--combined", action="store_true",
                    help="also all_<task>_quality: every dataset's columns side by side and their mean, per task "
                         "(on with --paper contrastscore)")
    ap.add_argument("--spa", action="store_true",
                    help="translation data: also WMT24's soft pairwise accuracy (system level, from permutation "
                         "p-values over segments; mt-metrics-eval pce.py) per row and language pair (on with "
                         "--paper contrastscore / t5score)")
    ap.add_argument("--spa-permutations", type=int, default=None,
                    help="--spa: sign-flip permutations per p-value (default 1000, mt-metrics-eval's)")
    ap.add_argument("--spa-seed", type=int, default=None,
                    help="--spa: seed of the sign flips (default 4, mt-metrics-eval's)")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples (0: no CIs)")
    ap.add_argument("--resample", default=None,
                    help="bootstrap unit: groups (documents / source segments, all their rows come along; the "
                         "default) or items (rows: summaries, translations)")
    ap.add_argument("--accuracy", default="summac",
                    help="quantized accuracy: summac (threshold on the dev cut, balanced accuracy on the test "
                         "cut; the default) or topk (cscore's earlier top-share rule, plain accuracy)")
    ap.add_argument("--permutations", type=int, default=1000, help="permutations per test (0: no clusters)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=0.05, help="CI level 1 - alpha and significance level, in (0, 1)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default: <path>/report, or <path>/report-<paper> with --paper, so "
                         "reports with other statistics do not replace each other; several paths: that folder in "
                         "the one holding them)")
    ap.add_argument("--select-by", default="spearman", choices=list(CORRELATIONS),
                    help="judge runs: the dev correlation that picks (lambda, t) per pair and score range")
    return ap


def main(argv: list[str]) -> None:
    from cscore.cli.exits import one_line_errors
    from cscore.metaeval.runs import check_folder

    if not any(a in ("-h", "--help") for a in argv):  # a folder that is not there: said before the report loads
        with one_line_errors():
            for folder in folders_named(argv):
                check_folder(Path(folder))
    args = parser().parse_args(argv)
    from cscore.files import writing
    from cscore.metaeval.assemble import ReportOptions, default_out, report
    from cscore.metaeval.spec import PAPERS
    from cscore.run import kinds
    from cscore.scorers import methods

    roots, preset = list(args.path), PAPERS.get(args.paper or "", {})  # nargs="+", type=Path
    with one_line_errors(), writing("the report", args.out or default_out(roots, args.paper)):  # a full disk: one line
        options = ReportOptions(select_by=args.select_by, combined=args.combined or bool(preset.get("combined")),
                                paper=args.paper, judge_methods=tuple(kinds.methods_of("judge")),
                                defaults=methods.with_defaults, spa=spa_from_args(args, preset))
        report(args.path, spec_from_args(args, preset), args.out, options=options)
