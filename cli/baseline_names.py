"""Baseline names on the command line: the row labels they write are accepted too
(``baseline=rouge1`` is rouge), and every unknown name is reported in one line."""

from __future__ import annotations


def aliases() -> dict[str, str]:
    """Row labels accepted as baseline names (``rouge1`` -> rouge, ``bertscore_f1`` -> bertscore, ...)."""
    from cscore.scorers.baselines import BASELINES, bertscore, generative

    out = {f"rouge{n}": "rouge" for n in range(1, 10)} | {"rougeL": "rouge", "rougeLsum": "rouge"}
    out |= {c: "bertscore" for c in bertscore.COLUMNS}
    for name in generative.NAMES:
        out |= {c: name for c in generative.columns(name, generative.DIRECTIONS)}
    return {a: n for a, n in out.items() if a not in BASELINES}


def names_in(value) -> list[str]:
    """The baseline names of an override's value: a name, a list, or a sweep of them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in names_in(v)]
    return [n for v in getattr(value, "list", None) or [] for n in names_in(v)]


def canonical_names(args: list[str]) -> list[str]:
    """``args`` with every ``baseline=`` name canonical (a list keeps each baseline once); a ConfigError
    names every unknown name at once."""
    if not any(a.lstrip("+~").split("=", 1)[0] == "baseline" and "=" in a for a in args):
        return args  # the baselines (and pandas, for COMET's scores) load only when one is named
    import re

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from cscore.errors import ConfigError
    from cscore.registry import suggest
    from cscore.scorers.baselines import BASELINES

    alias = aliases()
    out, unknown = [], []
    for arg in args:
        if arg.lstrip("+~").split("=", 1)[0] != "baseline" or "=" not in arg:
            out.append(arg)
            continue
        try:
            value = OverridesParser.create().parse_overrides([arg])[0].value()
        except OverrideParseException:
            out.append(arg)  # precheck reports it
            continue
        unknown += [n for n in names_in(value) if n not in BASELINES and n not in alias and n not in unknown]
        if isinstance(value, list):
            names = list(dict.fromkeys(alias.get(n, n) for n in names_in(value)))
            out.append(f"{arg.split('=', 1)[0]}=[{','.join(names)}]")
        else:
            key, text = arg.split("=", 1)
            out.append(f"{key}=" + re.sub(r"[A-Za-z_][\w]*", lambda m: alias.get(m.group(), m.group()), text))
    if unknown:
        wrong = ", ".join(f"{n!r}{suggest(n, [*BASELINES, *alias])}" for n in unknown)
        raise ConfigError(f"no baseline config {wrong}; available: {', '.join(BASELINES)} (a row one writes, "
                          "such as rouge1 or bertscore_f1, names it too)")
    return out
