"""``tracking=mlflow`` / ``tracking=wandb`` end to end through the CLI: runs and a two-point
multirun of the tiny pair (the demo's dev split, 16 items) logged for real, into a local MLflow
file store (read back with ``mlflow.search_runs``) and into W&B offline run folders (read back from
the ``.wandb`` file with wandb's own record schema); a tracker that fails or is not installed
costs one warning line and never the run."""

import json
import os
import struct
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cscore.tests.support.cli import run_main, tiny_args

pytestmark = pytest.mark.slow  # the fast tier (-m 'not slow') leaves these out

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")
wandb_pb = pytest.importorskip("wandb.proto.wandb_internal_pb2", reason="the wandb extra is not installed")


def dev_args(tiny_dirs) -> list[str]:
    return tiny_args(tiny_dirs, "split.use=dev")


def clean_env(root: Path, **extra) -> dict:
    """No tracker settings from the caller's environment; W&B's own folders inside ``root``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_"))}
    for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR"):
        env[name] = str(root / "wandb_home")
    return {**env, **extra}


def run_ok(cscore_cli, *args, cwd, env):
    res = cscore_cli(*args, cwd=cwd, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    return res


def run_here(*args, cwd, env):
    """run_ok in this process (run_main), for MLflow (its client keeps no run of ours between
    calls): ``env`` is os.environ during the call, the caller's again after it (the tracker sets
    its MLflow defaults there). W&B keeps a global run and its service: those stay subprocesses."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        res = run_main(*args, cwd=cwd)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    return res


def tracking_lines(res) -> list[str]:
    """Console lines from the callback, the trackers' loggers or printers, and any warning."""
    return [line for line in (res.stdout + res.stderr).splitlines()
            if "tracking=mlflow:" in line or "tracking=wandb:" in line  # the callback's (in a multirun:
            # Hydra's launcher log format, without the level)
            or line.lstrip().startswith("wandb:") or " mlflow." in line
            or "Warning:" in line or "WARNING" in line]


def correlations(run_dir: Path) -> dict[str, float]:
    """``<row>/<aspect>/<statistic>`` -> value, from the run's correlations.csv."""
    corr = pd.read_csv(run_dir / "correlations.csv")
    return {f"{r.metric}/{r.target}/{r.correlation}": r.value for r in corr.itertuples()}


def signature(run_dir: Path) -> str:
    return json.loads((run_dir / "metrics.json").read_text())["signature"]


# --- MLflow ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_runs(tiny_dirs, tmp_path_factory):
    """A single run into the default store (./outputs/mlruns) and a multirun into a named one."""
    root = tmp_path_factory.mktemp("mlflow")
    env = clean_env(root)
    single = run_here("run", *dev_args(tiny_dirs), "tracking=mlflow", f"hydra.run.dir={root / 'single'}",
                      cwd=root, env=env)
    store = (root / "store").as_uri()
    sweep = run_here("run", "-m", *dev_args(tiny_dirs), "tracking=mlflow", f"tracking.tracking_uri={store}",
                     "tracking.experiment=sweeps", "method.gamma=0.1,0.4", f"hydra.sweep.dir={root / 'sw'}",
                     cwd=root, env=env)
    return root, single, sweep, env


def search(monkeypatch, uri: str, experiment: str) -> pd.DataFrame:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return mlflow.search_runs(experiment_names=[experiment])


def assert_mlflow_run(run, run_dir: Path) -> None:
    """One MLflow run (a search_runs row) holds what ``run_dir`` says."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert run["params.method.gamma"] == str(config["method"]["gamma"])
    assert run["params.pair.name"] == "tiny" and run["params.tracking.name"] == "mlflow"
    assert run["params.stats.temperatures"] == json.dumps(config["stats"]["temperatures"])
    assert run["tags.signature"] == signature(run_dir)
    want = correlations(run_dir)
    assert len(want) == 4 * 4 * 3  # rows (expert, amateur, ensemble, contrast) x aspects x statistics
    for name, value in want.items():
        assert run[f"metrics.{name}"] == pytest.approx(value, nan_ok=True), name
    assert run["metrics.contrast/AVG/pearson"] == pytest.approx(
        sum(want[f"contrast/{a}/pearson"] for a in ("overall", "consistency", "fluency", "relevance")) / 4)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert run["metrics.n_items"] == metrics["n_items"] == 16
    speed = metrics["speed"]
    assert run["metrics.speed/score_seconds"] == pytest.approx(speed["score_seconds"])
    if speed["passes"]["expert"]["from_cache"]:  # a cached point: its own time, no speed borrowed from the first
        assert speed["samples_per_second"] is None and pd.isna(run.get("metrics.speed/samples_per_second"))
        assert pd.isna(run.get("metrics.speed/passes/expert/tokens"))
        assert run["metrics.speed/passes/expert/seconds_this_run"] == pytest.approx(
            speed["passes"]["expert"]["seconds_this_run"])
    else:
        assert run["metrics.speed/samples_per_second"] == pytest.approx(speed["samples_per_second"])
        assert run["metrics.speed/passes/expert/tokens"] == speed["passes"]["expert"]["tokens"]
    assert run["status"] == "FINISHED"


def test_mlflow_single_run(mlflow_runs, monkeypatch):
    root, single, _, _ = mlflow_runs
    assert not tracking_lines(single)  # nothing from the tracker on the console
    runs = search(monkeypatch, (root / "outputs" / "mlruns").as_uri(), "cscore")
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["tags.mlflow.runName"] == "single" and pd.isna(run.get("tags.mlflow.parentRunId"))
    assert_mlflow_run(run, root / "single")
    from mlflow.tracking import MlflowClient

    client = MlflowClient((root / "outputs" / "mlruns").as_uri())
    listed = {a.path for a in client.list_artifacts(run["run_id"], "run_dir")}
    assert {f"run_dir/{n}" for n in ("config.yaml", "metrics.json", "scores.parquet", "correlations.csv")} <= listed
    local = client.download_artifacts(run["run_id"], "run_dir/metrics.json", str(root / "download"))
    assert Path(local).read_text() == (root / "single" / "metrics.json").read_text()


def test_mlflow_multirun_is_a_parent_with_a_child_per_job(mlflow_runs, monkeypatch):
    root, _, sweep, _ = mlflow_runs
    assert not tracking_lines(sweep)
    runs = search(monkeypatch, (root / "store").as_uri(), "sweeps")
    parents = runs[runs["tags.cscore.role"] == "multirun"]
    assert len(parents) == 1 and len(runs) == 3
    parent = parents.iloc[0]
    assert parent["status"] == "FINISHED" and parent["tags.cscore.sweep_dir"] == str((root / "sw").resolve())
    assert "method.gamma=0.1,0.4" in parent["tags.cscore.overrides"]
    children = runs[runs["tags.mlflow.parentRunId"] == parent["run_id"]].sort_values("tags.cscore.job")
    assert list(children["tags.mlflow.runName"]) == ["0: method.gamma=0.1", "1: method.gamma=0.4"]
    for job, (_, child) in enumerate(children.iterrows()):
        assert_mlflow_run(child, root / "sw" / str(job))


def test_a_resumed_run_is_not_logged_twice(mlflow_runs, tiny_dirs, monkeypatch):
    root, _, _, env = mlflow_runs
    res = run_here("run", *dev_args(tiny_dirs), "tracking=mlflow", f"hydra.run.dir={root / 'single'}",
                   cwd=root, env=env)
    assert "is complete" in res.stdout + res.stderr
    assert len(search(monkeypatch, (root / "outputs" / "mlruns").as_uri(), "cscore")) == 1


# --- W&B offline -------------------------------------------------------------------------------


def wandb_records(path: Path) -> list:
    """The records of a ``.wandb`` file: LevelDB-log framing (32 KiB blocks, a 7-byte header
    per chunk: crc32, length, type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4) after W&B's 7-byte file
    header, each record one ``wandb_internal_pb2.Record``."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    out, pos, chunks, block = [], 7, b"", 32768
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # block trailer / padding
            pos += left
            continue
        chunks += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_pb.Record()
            record.ParseFromString(chunks)
            out.append(record)
            chunks = b""
    return out


def read_wandb_run(folder: Path) -> dict:
    """What an offline run folder holds: the run record's fields, its config and summary."""
    (file,) = folder.glob("run-*.wandb")
    out = {"config": {}, "summary": {}, "files": set()}
    for record in wandb_records(file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.update(project=record.run.project, name=record.run.display_name, group=record.run.run_group,
                       job_type=record.run.job_type)
            out["config"].update({u.key: json.loads(u.value_json) for u in record.run.config.update})
        elif kind == "summary":
            for u in record.summary.update:
                out["summary"][u.key or "/".join(u.nested_key)] = json.loads(u.value_json)
        elif kind == "files":
            out["files"] |= {f.path for f in record.files.files}
    return out


@pytest.fixture(scope="module")
def wandb_runs(tiny_dirs, tmp_path_factory, cscore_cli):
    """A single run into the default folder (./outputs/wandb) and a multirun into another."""
    root = tmp_path_factory.mktemp("wandb")
    env = clean_env(root)
    single = run_ok(cscore_cli, "run", *dev_args(tiny_dirs), "tracking=wandb", f"hydra.run.dir={root / 'single'}",
                    cwd=root, env=env)
    sweep = run_ok(cscore_cli, "run", "-m", *dev_args(tiny_dirs), "tracking=wandb", f"tracking.dir={root / 'wb'}",
                   "tracking.project=sweeps", "method.gamma=0.1,0.4", f"hydra.sweep.dir={root / 'sw'}",
                   cwd=root, env=env)
    return root, single, sweep


def assert_wandb_run(run: dict, folder: Path, run_dir: Path) -> None:
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert run["config"]["method"] == config["method"] and run["config"]["tracking"]["name"] == "wandb"
    assert run["config"]["signature"] == signature(run_dir)
    for name, value in correlations(run_dir).items():
        assert run["summary"][name] == pytest.approx(value, nan_ok=True), name
    assert run["summary"]["n_items"] == 16
    speed = json.loads((run_dir / "metrics.json").read_text())["speed"]
    if speed["samples_per_second"] is None:  # a sweep point read from the cache: no speed of its own
        assert "speed/samples_per_second" not in run["summary"] and speed["from_cache"]
    else:
        assert run["summary"]["speed/samples_per_second"] == pytest.approx(speed["samples_per_second"])
    assert "run_dir/metrics.json" in run["files"]
    assert (folder / "files" / "run_dir" / "metrics.json").read_text() == (run_dir / "metrics.json").read_text()


def test_wandb_single_run_offline(wandb_runs):
    root, single, _ = wandb_runs
    assert not tracking_lines(single)
    (folder,) = (root / "outputs" / "wandb").glob("offline-run-*")  # offline: nothing left the machine
    run = read_wandb_run(folder)
    assert run["project"] == "cscore" and run["name"] == "single" and run["group"] == ""
    assert_wandb_run(run, folder, root / "single")


def test_wandb_multirun_is_a_group_with_a_run_per_job(wandb_runs):
    root, _, sweep = wandb_runs
    assert not tracking_lines(sweep)
    folders = sorted((root / "wb" / "wandb").glob("offline-run-*"))
    runs = sorted([(read_wandb_run(f), f) for f in folders], key=lambda rf: rf[0]["name"])
    assert [r["name"] for r, _ in runs] == ["0: method.gamma=0.1", "1: method.gamma=0.4"]
    for job, (run, folder) in enumerate(runs):
        assert run["project"] == "sweeps" and run["job_type"] == "multirun"
        assert run["group"] == str((root / "sw").resolve())
        assert_wandb_run(run, folder, root / "sw" / str(job))


# --- failures cost one warning line ------------------------------------------------------------


@pytest.mark.parametrize("where, error", [("file", "NotADirectoryError"), ("http", "MlflowException")])
def test_an_mlflow_store_that_fails_is_one_warning_and_the_run_succeeds(where, error, tiny_dirs, tmp_path):
    """An unwritable local store (its folder's parent is a file), or a server nobody answers at
    (given up after cscore's default of 2 retries instead of MLflow's minutes)."""
    (tmp_path / "a_file").write_text("")
    uri = (tmp_path / "a_file" / "mlruns").as_uri() if where == "file" else "http://127.0.0.1:9"
    res = run_here("run", *dev_args(tiny_dirs), "tracking=mlflow", f"tracking.tracking_uri={uri}",
                   f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, env=clean_env(tmp_path))
    (line,) = tracking_lines(res)
    assert "WARNING" in line and "tracking=mlflow: run " in line and f"not tracked ({error}" in line
    assert (tmp_path / "r" / "metrics.json").is_file()


def test_a_failing_wandb_is_one_warning_and_the_run_succeeds(tiny_dirs, tmp_path, cscore_cli):
    """Online with no API key, against a server that is not there: wandb.init refuses."""
    env = clean_env(tmp_path, WANDB_BASE_URL="http://127.0.0.1:9")
    res = run_ok(cscore_cli, "run", *dev_args(tiny_dirs), "tracking=wandb", "tracking.mode=online",
                 f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, env=env)
    (line,) = tracking_lines(res)
    assert "WARNING" in line and "tracking=wandb: run " in line and "not tracked (" in line
    assert (tmp_path / "r" / "metrics.json").is_file()


def test_a_tracker_that_is_not_installed_is_one_warning_for_a_whole_multirun(tiny_dirs, tmp_path, cscore_cli):
    """mlflow made impossible to import in the subprocess: a package of that name first on its
    path that raises what Python raises for a missing package."""
    blocker = tmp_path / "blocker" / "mlflow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'mlflow\'", name="mlflow")\n')
    path = os.pathsep.join([str(blocker.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    res = run_ok(cscore_cli, "run", "-m", *dev_args(tiny_dirs), "tracking=mlflow", "method.gamma=0.1,0.4",
                 f"hydra.sweep.dir={tmp_path / 'sw'}", cwd=tmp_path, env=clean_env(tmp_path, PYTHONPATH=path))
    (line,) = tracking_lines(res)
    assert 'tracking=mlflow: mlflow is not installed (pip install "cscore[mlflow]"); runs are not tracked' in line
    assert all((tmp_path / "sw" / str(job) / "metrics.json").is_file() for job in (0, 1))
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("overrides, message", [
    (["tracking=mlfow"], "no tracking config 'mlfow' (did you mean mlflow?)"),
    (["tracking=wandb", "tracking.mode=sometimes"], "tracking.mode must be online | offline, got 'sometimes'"),
    (["tracking=mlflow", "tracking.experiment="], "tracking.experiment must name an MLflow experiment"),
    (["+tracking.project=x"], "unknown setting tracking.project; tracking=none has name"),
])
def test_tracking_config_mistakes_are_one_line(overrides, message, tmp_path, cscore_main):
    res = cscore_main("run", *overrides, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"cscore: error: {res.stderr.strip()[len('cscore: error: '):]}"]
    assert message in res.stderr
