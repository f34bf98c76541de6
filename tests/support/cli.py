"""The ``cscore`` command as the tests run it (a fresh process, or ``main()`` in this process)
and the arguments and run folders they share."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path


def is_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def tiny_args(tiny_dirs, *more: str) -> list[str]:
    """The overrides of a run of the tiny pair (the ``tiny_dirs`` fixture), then ``more``."""
    return [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", *more]


def write_jsonl(path: Path, rows, **dumps) -> Path:
    """``rows`` as a JSONL file at ``path`` (UTF-8; ``dumps``: json.dumps options)."""
    path.write_text("".join(json.dumps(r, **dumps) + "\n" for r in rows), encoding="utf-8")
    return path


def read_run(run_dir: Path):
    """(config, scores, metrics) of a finished run folder."""
    import pandas as pd
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    return cfg, pd.read_parquet(run_dir / "scores.parquet"), json.loads((run_dir / "metrics.json").read_text())


def run_cscore(*args, cwd, env=None, timeout=None) -> subprocess.CompletedProcess:
    """``python -m cscore.cli.main *args`` in ``cwd`` (a fresh process: nothing kept in memory
    between runs), output captured as text."""
    return subprocess.run([sys.executable, "-m", "cscore.cli.main", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


class Captured(io.TextIOWrapper):
    """A text stream that keeps what is written (UTF-8, with a ``buffer``, as pytest's capsys)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="UTF-8", newline="", write_through=True)

    def getvalue(self) -> str:
        return self.buffer.getvalue().decode("UTF-8")


def run_main(*args, cwd) -> subprocess.CompletedProcess:
    """``cscore.cli.main.main(args)`` in this process, run in ``cwd``, as run_cscore returns it: its
    exit status as returncode, its stdout / stderr captured; sys.argv, the working folder, Hydra's
    global state, its logging and the model pool are undone after the call. Needs no fixture, so
    module- and session-scoped fixtures can use it (``cscore_main``: the same for one test)."""
    from hydra.core.global_hydra import GlobalHydra

    from cscore.cli.main import main

    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    saved = {lg: (lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers}
    old_cwd, old_argv = os.getcwd(), sys.argv[:]  # run_command sets sys.argv for Hydra
    out, err = Captured(), Captured()
    os.chdir(cwd)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as stop:
                if isinstance(stop.code, str):  # as the interpreter does: the message on stderr, status 1
                    print(stop.code, file=sys.stderr)
                code = 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
    finally:
        os.chdir(old_cwd)
        sys.argv[:] = old_argv
        GlobalHydra.instance().clear()
        models = sys.modules.get("cscore.scorers.models.models")  # imported only if the run loaded one
        if models is not None:
            models.retain([])
        for lg, (handlers, level, propagate, disabled) in saved.items():  # Hydra's dictConfig undone
            for h in lg.handlers:
                if h not in handlers:
                    h.close()
            lg.handlers[:] = handlers
            lg.level, lg.propagate, lg.disabled = level, propagate, disabled
    return subprocess.CompletedProcess(["cscore", *args], code, out.getvalue(), err.getvalue())


def main_runner(monkeypatch, capsys):
    """run(*args, cwd) -> CompletedProcess: run_main for one test (the ``cscore_main`` fixture;
    conftest says when to use it); sys.argv also restored by ``monkeypatch``."""

    def run(*args, cwd) -> subprocess.CompletedProcess:
        capsys.readouterr()  # what the test printed before stays out of the streams
        monkeypatch.setattr(sys, "argv", list(sys.argv))
        res = run_main(*args, cwd=cwd)
        late = capsys.readouterr()  # written to streams held from before the call (none expected)
        return subprocess.CompletedProcess(res.args, res.returncode, res.stdout + late.out, res.stderr + late.err)

    return run


def write_mqm_with_reference(folder) -> object:
    """2 segments x (S1, S2 and the human reference ``ref``), one rater, en-de by its file name."""
    errors = {("S1", 1): ("Accuracy/Mistranslation", "Major"), ("S2", 1): ("Fluency/Grammar", "Minor"),
              ("S1", 2): ("Fluency/Grammar", "Minor")}
    text = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n" + "".join(
        f"{s}\td1\t{seg}\t{seg}\tr1\tSource {seg}.\tZiel {s} {seg}.\t"
        + "\t".join(errors.get((s, seg), ("No-error", "No-error"))) + "\n"
        for seg in (1, 2) for s in ("S1", "S2", "ref"))
    file = folder / "mqm_ted_ende.tsv"
    file.write_text(text, encoding="utf-8")
    return file


REF_LINE = "mqm: 2 human-reference rows (system ref) scored as a system; data.exclude_references=true drops them"


def write_scored_run(folder: Path, frame, config: dict, params: dict, speed: float | None = 1.0) -> None:
    """A finished contrast run as ``cscore report`` reads it, written by hand: ``config``, the scores
    ``frame`` and a metrics.json whose variants are expert, amateur and contrast (``params``)."""
    import yaml

    from cscore import __version__, rundir

    folder.mkdir(parents=True)
    (folder / rundir.CONFIG).write_text(yaml.safe_dump(config))
    frame.to_parquet(folder / rundir.SCORES, index=False)
    variants = [{"name": "expert", "method": "single", "params": {"model": "expert"}},
                {"name": "amateur", "method": "single", "params": {"model": "amateur"}},
                {"name": "contrast", "method": "contrast", "params": params}]
    rundir.write_metrics(folder, {"cscore_version": __version__, "signature": "s", "data": {}, "n_items": len(frame),
                                  "split": {"use": "all"}, "n_truncated": 0, "truncated_ids": [],
                                  "temperatures": [1.0], "variants": variants, "models": {}, "correlations": [],
                                  "speed": {"samples_per_second": speed}, "nonfinite_scores": {}, "environment": {}})


def score_columns(run: Path, prefixes: tuple[str, ...]):
    """The ``id`` column and the columns starting with one of ``prefixes`` of a run's scores."""
    import pandas as pd

    from cscore import rundir

    got = pd.read_parquet(run / rundir.SCORES)
    return got[["id", *[c for c in got.columns if c.startswith(prefixes)]]]


def assert_same_scores(a: Path, b: Path, prefixes: tuple[str, ...], more_than: int) -> None:
    """Runs ``a`` and ``b`` have the same columns of ``prefixes`` (more than ``more_than`` of them,
    ``id`` included), equal bit for bit."""
    import numpy as np

    x, y = score_columns(a, prefixes), score_columns(b, prefixes)
    assert list(x.columns) == list(y.columns) and len(x.columns) > more_than
    for c in x.columns:
        assert np.array_equal(x[c].to_numpy(), y[c].to_numpy()), c  # bit for bit
