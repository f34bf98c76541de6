"""Which human aspect a kind reads: a judge's ``method.aspect`` checked against the data, the
aspect a pooler (or ``cscore cdm``) trains on."""

from __future__ import annotations

from cscore import rundir
from cscore.errors import ConfigError


def human_aspects(table) -> list[str]:
    return [c.removeprefix(rundir.HUMAN) for c in rundir.human_columns(table.columns)]


def check_aspect(examples, aspect: str) -> None:
    from cscore.scorers.methods.params import suggest

    have = human_aspects(examples)
    if aspect not in have:
        raise ConfigError(f"method.aspect={aspect} but this data has no human.{aspect}{suggest(aspect, have)}; "
                          f"it has {', '.join(have) or 'no human scores'}")


def target_aspect(table, aspect: str | None) -> str:
    """The human aspect to train on: the one asked for, else the only one, else ``overall``."""
    have = human_aspects(table)
    if aspect is None:
        if len(have) == 1:
            return have[0]
        if "overall" in have:
            return "overall"
        raise ConfigError(f"the pooler trains on one human aspect and this data has {', '.join(have) or 'none'}: "
                          "set method.aspect=<one of them>")
    check_aspect(table, aspect)
    return aspect
