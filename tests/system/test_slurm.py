"""`cscore run -m hydra/launcher=slurm|slurm_warm` on a real SLURM cluster, and the one-line error
when SLURM is unreachable.

The cluster tests use a cluster that is already up (`sinfo` answers) without changing anything.
Without one, they start a one-node cluster on localhost with scripts/slurm-local.sh (root,
Debian: apt-get installs slurm-wlm, munge, slurmdbd, mariadb-server; writes /etc/slurm; starts
daemons), but only when CSCORE_ALLOW_SYSTEM_CHANGES=1 says the machine may be changed (.ci/run
sets it); otherwise they skip, naming the variable. Under CI=true nothing here skips: a cluster
that cannot be had is a failure. A cluster the tests started is stopped at the end of the
session, unless another pytest session is still using it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cscore.cli.slurm_check import SlurmUnavailable, check_slurm_available
from cscore.metaeval.runs import missing_jobs
from cscore.rundir import find_runs
from cscore.tests.support import REPO
from cscore.tests.support.cli import tiny_args

ROOT = REPO
SCRIPT = ROOT / "scripts" / "slurm-local.sh"
STATE = Path(os.environ.get("SLURM_LOCAL_DIR", "/tmp/slurm-local"))
START_LOCK = Path("/tmp/slurm-local-pytest.start.lock")  # held while a session starts or stops it
USERS_LOCK = Path("/tmp/slurm-local-pytest.users.lock")  # shared lock of every session using it
STARTED_BY_PYTEST = STATE / "started-by-pytest"
GAMMAS = ["0.05", "0.1", "0.2", "0.5"]
ALLOW_VAR = "CSCORE_ALLOW_SYSTEM_CHANGES"  # 1: the tests may install and start a local cluster
CLI_TIMEOUT = 300  # seconds a `cscore run` (conftest's cscore_cli) may take here


def launcher(partition: str) -> list[str]:
    """Small jobs: 1 CPU and 1 GB each (the local node has nproc CPUs); 5 min limit."""
    return [f"hydra.launcher.partition={partition}", "hydra.launcher.timeout_min=5",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def system_changes_allowed() -> bool:
    return os.environ.get(ALLOW_VAR) == "1"


def unavailable(reason: str):
    """No SLURM to test with: a failure under CI=true, a skip elsewhere."""
    if in_ci():
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def computed_and_read(run_dirs) -> dict[str, list[bool]]:
    """Per model: for each run dir, whether its pass came from the statistics cache."""
    out: dict[str, list[bool]] = {}
    for d in run_dirs:
        for model, p in json.loads((Path(d) / "metrics.json").read_text())["speed"]["passes"].items():
            out.setdefault(model, []).append(bool(p["from_cache"]))
    return out


def default_partition() -> str | None:
    """The default partition of a reachable cluster (`sinfo` marks it with *), None when `sinfo`
    fails or lists none."""
    if shutil.which("sinfo") is None:
        return None
    try:
        res = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return None
    names = res.stdout.split() if res.returncode == 0 else []
    return next((n.rstrip("*") for n in names if n.endswith("*")), names[0] if names else None)


def cluster_up() -> bool:
    return default_partition() is not None


def sacct_rows(job_id: str, want: int, timeout_s: float = 60) -> dict[str, dict[str, str]]:
    """sacct's rows for a job (array) once it lists `want` allocations, all finished. sacct lags
    squeue by a second or two, so poll."""
    fields = ["JobID", "JobName", "State", "Start", "End"]
    deadline = time.monotonic() + timeout_s
    while True:
        res = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", ",".join(fields)], capture_output=True,
                             text=True, timeout=30)
        rows = {r["JobID"]: r for r in (dict(zip(fields, line.split("|"))) for line in res.stdout.splitlines() if line)}
        finished = all(r["State"] not in ("PENDING", "RUNNING", "COMPLETING") for r in rows.values())
        if (res.returncode == 0 and len(rows) >= want and finished) or time.monotonic() > deadline:
            assert res.returncode == 0, res.stderr
            return rows
        time.sleep(0.5)


@pytest.fixture(scope="session")
def submitit_plugin():
    try:
        import hydra_plugins.hydra_submitit_launcher  # noqa: F401
        import submitit  # noqa: F401
    except ImportError as err:
        unavailable(f"hydra-submitit-launcher is not installed ({err}): pip install -e '.[slurm]'")


@pytest.fixture(scope="session")
def slurm_cluster(submitit_plugin):
    """A running local cluster, started with scripts/slurm-local.sh unless one is up already.

    Several pytest sessions may run this file at once (on one machine): each holds a shared lock
    on USERS_LOCK while it uses the cluster; starting and stopping happen under START_LOCK, and
    the cluster is stopped by the last session only, and only if a pytest session started it.

    Starting one changes the machine (packages, /etc/slurm, daemons): only with
    CSCORE_ALLOW_SYSTEM_CHANGES=1; a cluster that is up already is used as it is."""
    start_lock = open(START_LOCK, "a+")
    users = open(USERS_LOCK, "a+")
    fcntl.flock(start_lock, fcntl.LOCK_EX)
    try:
        if not cluster_up():
            if not system_changes_allowed():
                users.close()
                reason = (f"no SLURM cluster is up (`sinfo` fails) and {ALLOW_VAR} is not 1: set {ALLOW_VAR}=1 to "
                          "let the tests install slurm-wlm, munge, slurmdbd and mariadb-server (apt-get), write "
                          "/etc/slurm and start the daemons (bash scripts/slurm-local.sh start, as root), or "
                          "start a cluster first")
                if in_ci():
                    pytest.fail(f"CI=true: {reason}; .ci/run must export {ALLOW_VAR}=1", pytrace=False)
                pytest.skip(reason)
            if os.geteuid() != 0:
                users.close()
                unavailable("scripts/slurm-local.sh needs root (apt-get, system daemons)")
            if shutil.which("sbatch") is None and shutil.which("apt-get") is None:
                users.close()
                unavailable("SLURM is not installed and there is no apt-get to install it")
            t0 = time.perf_counter()
            res = subprocess.run(["bash", str(SCRIPT), "start", "--allow-system-changes"], capture_output=True,
                                 text=True, timeout=900, stdin=subprocess.DEVNULL)
            if res.returncode != 0:
                users.close()
                unavailable(f"`bash scripts/slurm-local.sh start` failed (exit {res.returncode}):\n"
                            f"{res.stdout[-2000:]}{res.stderr[-4000:]}")
            STARTED_BY_PYTEST.touch()
            print(f"\nslurm-local.sh start: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        fcntl.flock(users, fcntl.LOCK_SH)  # never waits: a stopping session holds start_lock
    finally:
        fcntl.flock(start_lock, fcntl.LOCK_UN)
    yield default_partition() or "debug"  # scripts/slurm-local.sh names its partition debug
    fcntl.flock(start_lock, fcntl.LOCK_EX)
    try:
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while another session uses it
        except BlockingIOError:
            return
        if STARTED_BY_PYTEST.exists():
            res = subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True, timeout=300,
                                 stdin=subprocess.DEVNULL)
            assert res.returncode == 0, res.stderr
            STARTED_BY_PYTEST.unlink(missing_ok=True)
    finally:
        users.close()
        start_lock.close()


@pytest.fixture(scope="module")
def array_sweep(slurm_cluster, tiny_dirs, tmp_path_factory, cscore_cli):
    """One 4-point gamma sweep through hydra/launcher=slurm, with its own (empty) statistics
    cache. The sweep dir is relative to the launching directory, so the jobs must run there to
    put their run dirs in it."""
    cwd = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "CSCORE_STATS_CACHE": str(cwd / "cache")}  # sbatch passes the environment on
    t0 = time.perf_counter()
    res = cscore_cli("run", "-m", "hydra/launcher=slurm", *launcher(slurm_cluster), *tiny_args(tiny_dirs),
                     f"method.gamma={','.join(GAMMAS)}", "hydra.sweep.dir=sweep", cwd=cwd, env=env,
                     timeout=CLI_TIMEOUT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    print(f"\n4-job array sweep: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return cwd / "sweep"


@pytest.mark.slow
def test_sweep_is_one_job_array_of_completed_tasks(slurm_cluster, array_sweep):
    scripts = list(array_sweep.glob(".submitit/*/*_submission.sh"))
    assert len(scripts) == 1, scripts  # one sbatch call
    script = scripts[0].read_text()
    assert "#SBATCH --array=0-3%" in script
    assert f"#SBATCH --partition={slurm_cluster}" in script and "#SBATCH --cpus-per-task=1" in script
    assert f"{sys.executable} -u -m submitit.core._submit" in script  # the launching interpreter
    assert "export OMP_NUM_THREADS=" in script
    array_id = scripts[0].parent.name
    rows = sacct_rows(array_id, want=len(GAMMAS))
    assert set(rows) == {f"{array_id}_{i}" for i in range(len(GAMMAS))}, rows
    assert {r["State"] for r in rows.values()} == {"COMPLETED"}, rows
    assert {r["JobName"] for r in rows.values()} == {"cscore"}
    for i in range(len(GAMMAS)):  # run dir i is array task i's
        hydra_yaml = (array_sweep / str(i) / ".hydra" / "hydra.yaml").read_text()
        assert f"id: '{array_id}_{i}'" in hydra_yaml


@pytest.mark.slow
def test_every_job_wrote_complete_outputs(array_sweep):
    tables = []
    for i, gamma in enumerate(GAMMAS):
        run = array_sweep / str(i)
        scores = pd.read_parquet(run / "scores.parquet")
        assert len(scores) == 160
        assert {"score.contrast", "score.expert", "score.amateur", "score.ensemble"} <= set(scores.columns)
        assert np.isfinite(scores["score.contrast"]).all()
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["n_items"] == 160
        assert (run / "correlations.csv").is_file()
        assert f"gamma: {gamma}" in (run / "config.yaml").read_text()
        tables.append(scores)
    for a in tables[1:]:  # gamma does not touch the expert's own score: the same pass, bit for bit
        np.testing.assert_array_equal(a["score.expert"].to_numpy(), tables[0]["score.expert"].to_numpy())
    for i in range(len(tables)):
        for j in range(i + 1, len(tables)):
            assert not np.allclose(tables[i]["score.contrast"], tables[j]["score.contrast"]), (GAMMAS[i], GAMMAS[j])


@pytest.mark.slow
def test_array_jobs_share_one_forward_pass_per_model(array_sweep):
    """The jobs start together; under the cache key's lock one computes each model's pass and the
    other three wait and read it."""
    sources = computed_and_read(array_sweep / str(i) for i in range(len(GAMMAS)))
    assert set(sources) == {"expert", "amateur"}
    for model, from_cache in sources.items():
        assert from_cache.count(False) == 1, (model, from_cache)


@pytest.mark.slow
def test_warm_preset_runs_the_first_point_then_the_array(slurm_cluster, tiny_dirs, tmp_path, cscore_cli):
    """hydra/launcher=slurm_warm: the warm-up job (point 0) fills an empty statistics cache, then
    the array's jobs only read it."""
    env = {**os.environ, "CSCORE_STATS_CACHE": str(tmp_path / "cache")}
    t0 = time.perf_counter()
    res = cscore_cli("run", "-m", "hydra/launcher=slurm_warm", *launcher(slurm_cluster), *tiny_args(tiny_dirs),
                     "method.gamma=0.1,0.5",
                     f"hydra.sweep.dir={tmp_path}/sweep", cwd=tmp_path, env=env, timeout=CLI_TIMEOUT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    print(f"\nwarm-up job + 2-job array: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    sweep = tmp_path / "sweep"
    ids = {p.read_text().count("--array"): p.parent.name for p in sweep.glob(".submitit/*/*_submission.sh")}
    assert set(ids) == {0, 1}, ids  # the warm-up job alone, then one array
    warm = sacct_rows(ids[0], want=1)
    array = sacct_rows(ids[1], want=2)
    assert [r["JobName"] for r in warm.values()] == ["cscore_warm"] and set(array) == {f"{ids[1]}_0", f"{ids[1]}_1"}
    assert {r["State"] for r in [*warm.values(), *array.values()]} == {"COMPLETED"}
    # ISO timestamps: the array started after the warm-up job had ended
    assert min(r["Start"] for r in array.values()) >= warm[ids[0]]["End"]
    first = pd.read_parquet(sweep / "0" / "scores.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(sweep / "warm" / "scores.parquet"), first)  # point 0, twice
    assert len(pd.read_parquet(sweep / "1" / "scores.parquet")) == 160
    assert computed_and_read([sweep / "warm"]) == {"expert": [False], "amateur": [False]}
    assert computed_and_read([sweep / "0", sweep / "1"]) == {"expert": [True, True], "amateur": [True, True]}


@pytest.mark.slow
def test_failed_warm_up_job_stops_the_sweep_with_one_line(slurm_cluster, tiny_dirs, tmp_path, cscore_cli):
    """The warm-up job fails as it loads an expert whose weights file is damaged (its config and
    tokenizer pass the precheck; weights load in the job). A data file that is not valid JSON is
    refused by the precheck before anything is submitted (issue 47, item 8)."""
    (tmp_path / "broken.jsonl").write_text("not json\n")
    res = cscore_cli("run", "-m", "hydra/launcher=slurm_warm", *launcher(slurm_cluster), *tiny_args(tiny_dirs),
                     f"data.path={tmp_path}/broken.jsonl", "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path}/early",
                     cwd=tmp_path, timeout=CLI_TIMEOUT)
    assert res.returncode == 2 and "broken.jsonl" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "early" / ".submitit").exists()  # nothing submitted
    damaged = tmp_path / "damaged"
    shutil.copytree(tiny_dirs.expert, damaged)
    for weights in damaged.glob("*.safetensors"):
        weights.write_bytes(b"not a safetensors file")
    res = cscore_cli("run", "-m", "hydra/launcher=slurm_warm", *launcher(slurm_cluster), *tiny_args(tiny_dirs),
                     f"pair.expert.path={damaged}", "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path}/sweep",
                     cwd=tmp_path, timeout=CLI_TIMEOUT)
    assert res.returncode == 1, res.stdout + res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("cscore: error: warm-up job ") and "_log.err" in last, last
    assert "Traceback" not in res.stderr
    assert len(list((tmp_path / "sweep" / ".submitit").glob("*/*_submission.sh"))) == 1  # no array


def assert_one_line_error(res, *fragments, code=1):
    assert res.returncode == code, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("cscore: error: SLURM is not reachable: "), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    assert "Traceback" not in res.stdout + res.stderr and "submitit" not in res.stdout


def test_no_sbatch_on_path_is_one_clear_line(submitit_plugin, tmp_path, cscore_cli):
    empty = tmp_path / "bin"
    empty.mkdir()
    res = cscore_cli("run", "-m", "hydra/launcher=slurm", "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path}/sweep",
                     cwd=tmp_path, env={**os.environ, "PATH": str(empty)}, timeout=CLI_TIMEOUT)
    assert_one_line_error(res, "`sbatch` is not on PATH", "scripts/slurm-local.sh start", code=2)  # before Hydra
    assert not (tmp_path / "sweep").exists()  # nothing submitted, nothing written


def test_failing_squeue_is_one_clear_line_and_nothing_is_submitted(submitit_plugin, tmp_path, cscore_main,
                                                                   monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(f"#!/bin/sh\ntouch {tmp_path}/sbatch-was-called\necho 'Submitted batch job 1'\n")
    (fake / "squeue").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller "
                                 "(connect failure)' >&2\nexit 1\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")  # looked up when the sweep starts
    res = cscore_main("run", "-m", "hydra/launcher=slurm_warm", "method.gamma=0.1,0.5",
                      f"hydra.sweep.dir={tmp_path}/sweep", cwd=tmp_path)
    assert_one_line_error(res, "`squeue` failed: slurm_load_jobs error: Unable to contact slurm controller")
    assert not (tmp_path / "sbatch-was-called").exists()


def test_a_sharded_sweep_with_a_node_local_cache_is_one_line_before_anything_is_submitted(submitit_plugin, tiny_dirs,
                                                                                         tmp_path, cscore_main,
                                                                                         monkeypatch):
    """The shards of a job array meet in the statistics cache: one on tmpfs (/dev/shm), which no
    other node sees, is refused in the launching process (a job would refuse it too)."""
    from cscore.run.launch import file_system

    if file_system(Path("/dev/shm")) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm here")
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("sbatch", "squeue"):
        (fake / tool).write_text(f"#!/bin/sh\ntouch {tmp_path}/{tool}-was-called\n")
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    res = cscore_main("run", "-m", "hydra/launcher=slurm", *tiny_args(tiny_dirs), "runtime.shards=3",
                      f"cache.dir=/dev/shm/cscore-test-{os.getpid()}", f"hydra.sweep.dir={tmp_path}/sweep",
                      cwd=tmp_path)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode != 0 and len(lines) == 1, res.stdout + res.stderr
    assert "is on tmpfs, which no other node sees" in lines[0] and "cache.dir=" in lines[0], lines[0]
    assert not list(tmp_path.glob("*-was-called")) and not (tmp_path / "sweep").exists()
    assert not Path(f"/dev/shm/cscore-test-{os.getpid()}").exists()


@pytest.mark.slow
def test_controller_down_is_one_clear_line(slurm_cluster, tmp_path, cscore_cli):
    """The real squeue against a controller that does not answer (a copy of the cluster's
    slurm.conf with a port nothing listens on; squeue gives up after about 9 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
    lines = [f"SlurmctldPort={port}" if line.startswith("SlurmctldPort=") else line for line in conf.splitlines()]
    (tmp_path / "slurm.conf").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf")}
    res = cscore_cli("run", "-m", "hydra/launcher=slurm", "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path}/sweep",
                     cwd=tmp_path, env=env, timeout=CLI_TIMEOUT)
    assert_one_line_error(res, "`squeue` failed: ", "Unable to contact slurm controller")


def test_check_slurm_available_raises_a_runtime_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="`sbatch` is not on PATH") as info:
        check_slurm_available()
    assert isinstance(info.value, SlurmUnavailable)


# ---------------------------------------------------------------------------------------------
# runtime.shards=3 as one job array (issue 32): the last shard to finish merges and writes the run
# directory; a later sweep point reads the merged entry


SHARDS = 3
SHARD_ARGS = ["runtime.threads=1", "runtime.token_budget=512", "method.gamma=0.1"]  # 160 items: many batches


def run_dirs(sweep: Path) -> list[Path]:
    """A sweep dir's run directories (Hydra's numbered job dirs; .submitit and .shards left out)."""
    return sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))


def job_logs(sweep: Path) -> dict[str, str]:
    """Each array task's stdout (submitit's <job id>_<task>_0_log.out), by task id."""
    return {p.parent.name: p.read_text() for p in sweep.glob(".submitit/*_*/*_0_log.out")}


def score_table(run: Path) -> pd.DataFrame:
    got = pd.read_parquet(run / "scores.parquet")
    return got[["id", *[c for c in got.columns if c.startswith(("score.", "mean_logp", "n_scored"))]]]


@pytest.fixture(scope="module")
def sharded_array(slurm_cluster, tiny_dirs, tmp_path_factory, cscore_cli):
    """`cscore run -m hydra/launcher=slurm runtime.shards=3` (one 3-task job array, its statistics
    cache in the launching directory); then the same config unsharded (no SLURM, its own cache);
    then a later sweep point over the merged entry (method.gamma=0.5 as 2 shard jobs, which run at
    once here: the shard count is no part of the cache key)."""
    cwd = tmp_path_factory.mktemp("slurm_shards")
    common = [*launcher(slurm_cluster), *tiny_args(tiny_dirs), f"cache.dir={cwd / 'cache'}"]
    # the unsharded run here, while the array runs (its own cache: it computes its own pass)
    one = subprocess.Popen([sys.executable, "-m", "cscore.cli.main", "run", *tiny_args(tiny_dirs), *SHARD_ARGS,
                            f"cache.dir={cwd / 'cache1'}", f"hydra.run.dir={cwd / 'one'}"], cwd=cwd, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        t0 = time.perf_counter()
        res = cscore_cli("run", "-m", "hydra/launcher=slurm", *common, *SHARD_ARGS, f"runtime.shards={SHARDS}",
                         "hydra.sweep.dir=sweep", cwd=cwd, timeout=CLI_TIMEOUT)
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
        t1 = time.perf_counter()
        later = cscore_cli("run", "-m", "hydra/launcher=slurm", *common, *SHARD_ARGS, "method.gamma=0.5",
                           "runtime.shards=2", "hydra.sweep.dir=later", cwd=cwd, timeout=CLI_TIMEOUT)
        assert later.returncode == 0, later.stdout[-4000:] + later.stderr[-4000:]
        print(f"\n{SHARDS}-shard job array {t1 - t0:.1f}s, the later point's {time.perf_counter() - t1:.1f}s",
              file=sys.stderr)
        out, _ = one.communicate(timeout=CLI_TIMEOUT)
        assert one.returncode == 0, out[-4000:]
    finally:
        one.kill()  # nothing left running when an assertion fails first
        one.wait()
    return SimpleNamespace(sweep=cwd / "sweep", later=cwd / "later", one=cwd / "one", cache=cwd / "cache")


@pytest.mark.slow
def test_three_shard_array_leaves_one_run_directory_equal_to_the_unsharded_run(sharded_array):
    sweep = sharded_array.sweep
    scripts = list(sweep.glob(".submitit/*/*_submission.sh"))
    assert len(scripts) == 1 and f"#SBATCH --array=0-{SHARDS - 1}%" in scripts[0].read_text()  # one job array
    array_id = scripts[0].parent.name
    rows = sacct_rows(array_id, want=SHARDS)
    assert set(rows) == {f"{array_id}_{k}" for k in range(SHARDS)}, rows
    assert {r["State"] for r in rows.values()} == {"COMPLETED"}, rows
    logs = job_logs(sweep)
    for k in range(SHARDS):  # task k computed shard k of both passes, with work of its own
        said = logs[f"{array_id}_{k}"]
        for label in ("expert", "amateur"):
            done = [x for x in said.splitlines() if f"statistics ({label}): shard {k} of {SHARDS} done: " in x]
            assert len(done) == 1 and " 0 items" not in done[0], said[-3000:]
    merged = [t for t, said in logs.items() if "statistics (expert): 3 shards merged in" in said]
    assert len(merged) == 1, logs
    runs = run_dirs(sweep)
    assert len(runs) == 1, runs  # the jobs that left the merge to another removed theirs
    assert missing_jobs(sweep, find_runs(sweep)) == []  # `cscore report`: the one sweep point is there
    assert f"run directory: {runs[0]}" in logs[f"{array_id}_{runs[0].name}"]
    pending = [said for t, said in logs.items() if t != f"{array_id}_{runs[0].name}"]
    for said in pending:  # the others' one line: what was missing and the command that runs it
        line = next(x for x in said.splitlines() if "not done yet; the run is incomplete: `cscore run " in x)
        assert "runtime.shards=3" in line and "submitit" not in line, line
    a, b = score_table(sharded_array.one), score_table(runs[0])
    assert list(a.columns) == list(b.columns) and len(a) == 160
    for c in a.columns:
        assert np.array_equal(a[c].to_numpy(), b[c].to_numpy()), c  # bit for bit
    assert (sharded_array.one / "correlations.csv").read_bytes() == (runs[0] / "correlations.csv").read_bytes()
    speed = json.loads((runs[0] / "metrics.json").read_text())["speed"]
    assert speed["shards"] == SHARDS and speed["merge_seconds"] > 0
    assert set(speed["shard_seconds"]) == {"expert", "amateur"}
    assert all(len(s) == SHARDS and min(s) > 0 for s in speed["shard_seconds"].values()), speed["shard_seconds"]
    assert not speed["from_cache"]
    assert not list(sharded_array.cache.glob(".partial/*/*"))  # merged: the partials are gone


@pytest.mark.slow
def test_a_later_sweep_point_reads_the_merged_entry(sharded_array):
    runs = run_dirs(sharded_array.later)
    assert len(runs) == 1, runs  # two shard jobs, both with the entry: one writes
    assert computed_and_read(runs) == {"expert": [True], "amateur": [True]}  # no model ran
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert set(metrics["speed"]["weights"].values()) == {"not loaded"}, metrics["speed"]["weights"]
    assert "gamma: 0.5" in (runs[0] / "config.yaml").read_text()
    later, first = score_table(runs[0]), score_table(run_dirs(sharded_array.sweep)[0])
    assert np.array_equal(later["score.expert"].to_numpy(), first["score.expert"].to_numpy())
    assert not np.allclose(later["score.contrast"].to_numpy(), first["score.contrast"].to_numpy())
    said = "".join(job_logs(sharded_array.later).values())
    assert said.count("this sweep point's run directory is ") == 1, said[-3000:]  # the other one names it
