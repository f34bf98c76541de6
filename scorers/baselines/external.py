"""Scores computed elsewhere (COMET, whose package cannot live in cscore's environment), read from
a .csv / .tsv / .jsonl / .parquet file with an id column and joined by row id; a run's row without a
score gets NaN and is counted (docs/methods/baselines.md, COMET)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cscore.errors import ConfigError
from cscore.scorers.baselines.common import BASELINES, Baseline, BaselineRun, Result, Texts
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.methods.params import Param, required

NAME_RE = re.compile(r"^[\w.\-]+$")


class Columns:
    """null (every column but id) or a list of plain column names."""

    def check(self, key: str, value):
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and NAME_RE.match(v)
                                                                       for v in value):
            raise ConfigError(f"{key} must be null or a list of column names (letters, digits, _ . -), got {value!r}")
        return list(value)


@dataclass
class ExternalParams:
    path: str | None = required(Param(str, nullable=True))
    columns: list | None = required(Columns())
    id_column: str = required(Param(str))


def read(path: str) -> pd.DataFrame:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"baseline.external.path={path}: no such file")
    try:
        if file.suffix == ".parquet":
            return pd.read_parquet(file)
        if file.suffix == ".jsonl":
            return pd.read_json(file, lines=True, dtype=False, precise_float=True)
        if file.suffix in (".csv", ".tsv"):
            return pd.read_csv(file, sep="\t" if file.suffix == ".tsv" else ",", dtype={"id": str})
    except (ValueError, OSError) as err:
        raise InputError(f"{file}: cannot read it: {str(err).splitlines()[0]}") from None
    raise ConfigError(f"baseline.external.path={path}: a .csv, .tsv, .jsonl or .parquet file, please")


def score_table(params: ExternalParams) -> tuple[str, pd.DataFrame, list[str]]:
    """(the scores file, its table, the score columns read), checked."""
    path = params.path
    if not path:
        raise ConfigError("baseline=external reads scores computed elsewhere: give baseline.external.path=<file> "
                          "(an id column and one column per metric)")
    table = read(path)
    ident = params.id_column
    if ident not in table.columns:
        raise ConfigError(f"{path}: no {ident!r} column (set baseline.external.id_column); "
                          f"it has {', '.join(map(str, table.columns))}")
    have = [str(c) for c in table.columns if c != ident]
    wanted = params.columns if params.columns is not None else have
    for c in wanted:
        if c not in have or not NAME_RE.match(c):
            raise ConfigError(f"{path}: no score column {c!r}; it has {', '.join(have) or 'none'}")
    return path, table, list(wanted)


@BASELINES
class External(Baseline):
    rank = 4
    name = "external"
    Params = ExternalParams

    @classmethod
    def check(cls, params: ExternalParams) -> None:
        score_table(params)

    @classmethod
    def columns(cls, params: ExternalParams) -> list[str]:
        return score_table(params)[2]

    @classmethod
    def score(cls, params: ExternalParams, texts: Texts, run: BaselineRun) -> Result:
        path, table, columns = score_table(params)
        ids = table[params.id_column].astype(str)
        dup = ids[ids.duplicated()].tolist()
        if dup:
            raise InputError(f"{path}: id {dup[0]!r} appears more than once")
        if run.ids is None:
            raise InputError("baseline external joins scores by row id: the run's ids are needed")
        rows = pd.Index(ids)
        out, missing = {}, set()
        for c in columns:
            values = pd.to_numeric(table[c], errors="coerce")
            bad = table[c].notna() & values.isna()
            if bad.any():
                raise InputError(f"{path}: column {c!r}, id {ids[bad].iloc[0]!r}: {table[c][bad].iloc[0]!r} is "
                                 "not a number")
            col = pd.Series(values.to_numpy(dtype=np.float64), index=rows).reindex(run.ids).to_numpy()
            missing |= set(np.flatnonzero(np.isnan(col)).tolist())
            out[c] = col
        extra = len(set(ids) - set(run.ids))
        info = {"file": str(Path(path).expanduser().resolve()), "missing_score": sorted(missing),
                "ids_not_in_run": extra, "signature": f"external|file:{Path(path).name}|columns:{','.join(out)}"}
        return Result(out, info)
