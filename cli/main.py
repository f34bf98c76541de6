"""The ``cscore`` command: ``cscore run [hydra overrides]``."""

from __future__ import annotations

import sys

from cscore.cli.exits import RUN_INTERRUPTED, ctrl_c, one_line_errors

USAGE = """usage: cscore <command> [args]

commands:
  run [overrides]   score a dataset with a model pair and a method, then meta-evaluate
                    e.g. cscore run method=contrast pair=qwen_3b_0.5b data=demo
                         cscore run -m method.gamma=0.05,0.1,0.2
                         cscore run --cfg job      (print the composed config)
                         cscore run --help         (config groups and options; --help-all: all)
  cdm generate ...  Generative CDM: negatives from positives with the degraded amateur of the pair
  cdm train ...     train a discriminator on them; then: cscore run method=cdm_gen model=<trained dir>
  t5score train ...  T5Score's discriminative training on human-ranked pairs; then:
                    cscore run method=baseline baseline=t5score baseline.t5score.model=<trained dir>
  data export ...   write the validated example table: data=<name> out=<file.parquet|.jsonl|folder>
  data check ...    print a dataset card: data=<name> [tokenizer=<model spec>]
  report DIR        paper-style tables (CIs, significance clusters, bias, speed) and plots
                    from a run or multirun directory; cscore report --help for options
  list [KIND]       what is available here, one line each: datasets, pairs (which run offline),
                    methods, baselines; all four when no KIND is named
  cache ls          list the cached per-token statistics (all cache commands: --root DIR)
  cache info KEY    one cache entry in detail, checksum verified (KEY: a key prefix)
  cache clear KEY.. remove cache entries by key prefix, or all of them: cache clear --all
  --version         the versions of cscore, torch, transformers and python
"""


def run_command(rest: list[str]) -> None:
    """Check the config(s) first (one line per mistake, no run directory), then hand over to Hydra.
    ``--help`` is the short page (``cli/run_help.py``); ``--help-all`` is Hydra's ``--help``."""
    if any(a in ("-h", "--help") for a in rest):
        from cscore.cli import run_help

        print(run_help.text())
        return
    rest = ["--help" if a == "--help-all" else a for a in rest]
    with one_line_errors(RUN_INTERRUPTED, code=2):
        from cscore.cli import names, precheck, resume
        from cscore.cli.baseline_names import canonical_names
        from cscore.run import launch

        rest = canonical_names(rest)  # baseline=rouge1 is rouge; every unknown name in one line
        precheck.check(rest)
        rest = launch.array_shards(rest)  # -m runtime.shards=N: one job per shard (one job array)

        rest = resume.earlier_dir(rest)  # the same command resumes in the folder a failure or Ctrl-C left
        rest = names.sweep_dir(rest)  # a multirun's folder named after what its jobs share
        from cscore.cli.run import hydra_entry

        sys.argv = ["cscore run", *rest]
        hydra_entry()


def print_version(rest: list[str]) -> None:
    """``cscore 0.1.0 (torch 2.13.0, transformers 5.0.0, python 3.12.3)``, from the packages' metadata."""
    import platform
    from importlib import metadata

    from cscore import __version__

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    print(f"cscore {__version__} (torch {installed('torch')}, transformers {installed('transformers')}, "
          f"python {platform.python_version()})")


def main(argv: list[str] | None = None) -> None:
    with ctrl_c(program=argv is None):
        dispatch(list(sys.argv[1:] if argv is None else argv))


def print_usage(rest: list[str]) -> None:
    print(USAGE)


# each command -> "module:function", imported only when that command runs
COMMANDS: dict[str, str] = {
    "run": "cscore.cli.main:run_command",
    "data": "cscore.cli.data_cmd:main",
    "cdm": "cscore.cli.cdm_cmd:main",
    "t5score": "cscore.cli.t5score_cmd:main",
    "report": "cscore.cli.report_cmd:main",
    "list": "cscore.cli.list_cmd:main",
    "cache": "cscore.cli.cache_cmd:main",
    **dict.fromkeys(("-h", "--help", "help"), "cscore.cli.main:print_usage"),
    **dict.fromkeys(("-V", "--version", "version"), "cscore.cli.main:print_version"),
}


def dispatch(argv: list[str]) -> None:
    command, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if command not in COMMANDS:
        from cscore.registry import suggest

        hint = suggest(command, [c for c in COMMANDS if not c.startswith("-")])
        print(f"cscore: unknown command {command!r}{hint}\n\n{USAGE}", file=sys.stderr)
        sys.exit(2)
    from importlib import import_module

    module, function = COMMANDS[command].split(":")
    getattr(import_module(module), function)(rest)


if __name__ == "__main__":
    main()
