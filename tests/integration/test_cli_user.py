"""What a new user meets: config mistakes caught before anything loads, the early-exit rule,
labels that name what ran, one console line per left-out reason, truthful cache-hit figures,
run directories of failed runs, Ctrl-C, and `cscore cache` listings."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from rich.console import Console

from cscore import ModelPair
from cscore.cli import main as cli_main
from cscore.cli import run as cli_run
from cscore.cli.cache_cmd import cmd_ls
from cscore.cli.cache_cmd import main as cache_main
from cscore.data.demo import DEMO_FILE
from cscore.metaeval.signature import Signature
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support.cli import run_main


def composed(*overrides):
    with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("override, message", [
    ("method.gamma=abc", "method.gamma must be a number in [0, 1], got 'abc'"),
    ("runtime.device=tpu", "runtime.device must be auto | cpu | cuda | cuda:N | mps, got 'tpu'"),
    ("runtime.token_budget=-5", "runtime.token_budget must be an integer >= 1 or auto, got -5"),
    ("method.norm=foo", "method.norm must be sum | mean | sqrt, got 'foo'"),
    ("method.gama=0.2", "no setting method.gama (did you mean method.gamma?)"),
    ("method=contrst", "no method config 'contrst' (did you mean contrast?)"),
    ("pair.amateur.early_exit=0", "pair.amateur.early_exit must be an integer >= 1, got 0"),
    ("+runtime.foo=1", "unknown setting runtime.foo"),
    ("stats.temperatures=[]", "stats.temperatures must be a non-empty list"),
])
def test_config_mistakes_are_one_line_before_anything_runs(override, message, tmp_path, cscore_main):
    res = cscore_main("run", override, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"cscore: error: {res.stderr.strip()[len('cscore: error: '):]}"]
    assert message in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "outputs").exists()  # no run directory


def test_a_multirun_checks_every_point_before_the_first_job(tmp_path, cscore_main):
    res = cscore_main("run", "-m", "method.gamma=0.1,2", cwd=tmp_path)
    assert res.returncode == 2
    assert "method.gamma must be a number in [0, 1], got 2.0 (multirun point method.gamma=2)" in res.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


def test_a_method_that_needs_an_amateur_needs_one():
    from cscore.errors import ConfigError
    from cscore.run.validate import validate

    with pytest.raises(ConfigError, match="needs an amateur"):
        validate(composed("pair.amateur.early_exit=null"))
    validate(composed("pair.amateur.early_exit=null", "method=single"))  # the expert alone is fine


def test_the_pair_early_exit_is_for_the_model_the_pair_names():
    cfg = composed("pair.amateur.path=/models/B")
    notes = cli_run.resolve_pair(cfg, ["pair.amateur.path=/models/B"])
    assert cfg.pair.amateur.early_exit is None and "runs whole" in notes[0]
    assert cfg.pair.name == "smollm2+B"
    cfg = composed("pair.amateur.path=/models/B", "pair.amateur.early_exit=2")
    cli_run.resolve_pair(cfg, ["pair.amateur.path=/models/B", "pair.amateur.early_exit=2"])
    assert cfg.pair.amateur.early_exit == 2 and cfg.pair.name == "smollm2+B[:2]"  # asked for on B itself
    cfg = composed("pair.expert.path=/models/A")
    cli_run.resolve_pair(cfg, ["pair.expert.path=/models/A"])
    assert cfg.pair.amateur.early_exit == "auto" and cfg.pair.name == "A+A[:auto]"  # the expert's own exit
    cfg = composed()
    assert cli_run.resolve_pair(cfg, []) == [] and cfg.pair.name == "smollm2"
    cfg = composed("pair.expert.path=/models/A", "pair.name=mine")
    cli_run.resolve_pair(cfg, ["pair.expert.path=/models/A", "pair.name=mine"])
    assert cfg.pair.name == "mine"


@pytest.fixture(scope="module")
def demo_with_gaps(tmp_path_factory):
    """The first 16 demo rows, three of them with an empty hypothesis."""
    folder = tmp_path_factory.mktemp("gaps")
    lines = DEMO_FILE.read_text().splitlines()[:16]
    out = []
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if i in (2, 5, 9):
            rec["hypothesis"] = "  "
        out.append(json.dumps(rec))
    path = folder / "demo_gaps.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.fixture(scope="module")
def two_runs(tiny_dirs, demo_with_gaps, tmp_path_factory, cscore_cli):
    """The README's usage line with a replaced amateur (no early_exit given), run twice on one cache:
    first in a fresh process (the fast tier's one whole ``cscore run`` from a fresh interpreter: what
    the tests' imports could hide), then in this process (run_main), which meets only what the first
    left on disk."""
    root = tmp_path_factory.mktemp("user")
    args = [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            f"data.path={demo_with_gaps}", f"cache.dir={root / 'stats'}", "runtime.progress=false"]
    first = cscore_cli("run", *args, f"hydra.run.dir={root / 'a'}", cwd=root)
    second = run_main("run", *args, f"hydra.run.dir={root / 'b'}", cwd=root)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    return root, first, second


@pytest.mark.slow
def test_a_replaced_amateur_runs_whole_and_labels_name_it(two_runs, tiny_dirs, demo_with_gaps):
    root, first, _ = two_runs
    metrics = json.loads((root / "a" / "metrics.json").read_text())
    assert metrics["models"]["amateur"]["layers"] == 2 and "early_exit" not in metrics["models"]["amateur"]
    assert "runs whole" in first.stderr + first.stdout
    assert Signature.parse(metrics["signature"]).fields["pair"] == "expert+amateur"
    assert "name: expert+amateur" in (root / "a" / "config.yaml").read_text()
    scores = pd.read_parquet(root / "a" / "scores.parquet")
    pair = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur)  # the whole 2-layer amateur
    got = pair.statistics(list(scores["prompt"]), list(scores["hypothesis"])).score("single", model="amateur")
    # same model, same tokens, another process: float32 sums agree far inside 1e-4 relative
    np.testing.assert_allclose(scores["score.amateur"], got, rtol=1e-4)


def test_the_python_api_gives_the_runs_scores_bit_for_bit(two_runs, tiny_dirs):
    """Issue 47 item 2: the API's passes run on the thread count of ``cscore run``'s rule (auto),
    not on the count torch has (2 here, as torch's own default on a 2-core machine), and give the
    fresh-process run's scores exactly; torch's count is back after."""
    import torch

    root, _, _ = two_runs
    scores = pd.read_parquet(root / "a" / "scores.parquet")
    run_threads = json.loads((root / "a" / "metrics.json").read_text())["speed"]["threads"]
    pair = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur)
    before, seen = torch.get_num_threads(), []
    torch.set_num_threads(2)
    try:
        st = pair.statistics(list(scores["prompt"]), list(scores["hypothesis"]),
                             progress=lambda label, n: lambda done: seen.append(torch.get_num_threads()))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert set(seen) == {run_threads}
    for col, method, params in [("score.expert", "single", {}), ("score.amateur", "single", {"model": "amateur"}),
                                ("score.ensemble", "ensemble", {}), ("score.contrast", "contrast", {})]:
        np.testing.assert_array_equal(scores[col].to_numpy(), st.score(method, **params), err_msg=col)


def test_an_upside_down_pair_says_so_in_one_line(tiny_dirs, tmp_path, cscore_main, monkeypatch):
    """Issue 47 item 7: the 2-layer model as the expert and the 4-layer one as the amateur: one
    console line with both parameter counts (built by hand in tests/unit/scorers/models/test_size.py)."""
    from cscore.scorers.models import size

    monkeypatch.setattr(size, "_CHECKED", set())  # a pair checked earlier in this process is not checked again
    rows = tmp_path / "four.jsonl"
    rows.write_text("\n".join(DEMO_FILE.read_text().splitlines()[:4]) + "\n")
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.amateur}", f"pair.amateur.path={tiny_dirs.expert}",
                      f"data.path={rows}", "cache.enabled=false", "runtime.progress=false",
                      f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [line for line in (res.stdout + res.stderr).splitlines() if "is not smaller than expert" in line]
    assert len(lines) == 1, res.stdout + res.stderr
    assert (f"amateur {tiny_dirs.expert} (62,752 parameters) is not smaller than expert {tiny_dirs.amateur} "
            "(44,192): contrastive methods assume a smaller amateur") in lines[0]


@pytest.mark.slow
def test_left_out_rows_are_one_line_per_reason_and_listed_in_the_run(two_runs):
    root, first, _ = two_runs
    out = first.stdout + first.stderr
    assert len([line for line in out.splitlines() if "dropped 3 rows" in line]) == 1
    assert "demo-01-dropped" not in out  # the ids are not on the console ...
    log = (root / "a" / "run.log").read_text()
    assert log.count("dropped demo-0") == 3  # ... but in run.log
    metrics = json.loads((root / "a" / "metrics.json").read_text())
    assert [d["kind"] for d in metrics["data"]["details"]] == ["dropped"] * 3 and metrics["n_items"] == 13


def test_a_cache_hit_prints_what_this_run_did(two_runs):
    _, first, second = two_runs
    assert "scored 13 items in" in first.stdout and "read from the cache" not in first.stdout
    assert "read from the cache in" in second.stdout and "scored 13 items in" not in second.stdout
    assert "computed earlier in" in second.stdout


def test_a_cache_hit_gives_the_same_scores(two_runs):
    """The same config run again reads the statistics the first run computed: bit-identical scores."""
    root, _, _ = two_runs
    computed = json.loads((root / "a" / "metrics.json").read_text())["speed"]["passes"]
    read = json.loads((root / "b" / "metrics.json").read_text())["speed"]["passes"]
    assert not any(p["from_cache"] for p in computed.values()) and all(p["from_cache"] for p in read.values())
    pd.testing.assert_frame_equal(pd.read_parquet(root / "a" / "scores.parquet"),
                                  pd.read_parquet(root / "b" / "scores.parquet"), check_exact=True)


def test_tables_keep_their_width_off_a_terminal(two_runs):
    _, first, _ = two_runs
    header = next(line for line in first.stdout.splitlines() if "consistency" in line)
    assert "relevance" in header and "AVG" in header  # not squeezed into 80 columns


def test_a_run_that_fails_before_scoring_leaves_no_directory(tiny_dirs, tmp_path, cscore_main):
    """A data file that is there but not valid fails as it loads (one that is not there is refused
    before the run starts: tests/unit/cli/test_precheck_up_front.py)."""
    (tmp_path / "broken.jsonl").write_text("not json\n")
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", "data=summeval",
                      f"data.path={tmp_path / 'broken.jsonl'}", cwd=tmp_path)
    assert res.returncode == 2 and "broken.jsonl:1:1: not valid JSON" in res.stderr
    assert len([line for line in (res.stdout + res.stderr).splitlines() if "broken.jsonl" in line]) == 1  # said once
    assert not list(tmp_path.rglob("run.log"))


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_run, "hydra_entry", interrupted)
    with pytest.raises(SystemExit) as stop:
        cli_main.main(["run"])
    assert stop.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["cscore: error: interrupted; nothing finished was lost (the same command resumes: finished runs, "
                   "cached statistics and the checkpoint of an unfinished pass are kept)"]


def test_failed_run_is_marked(tmp_path):
    err = RuntimeError("out of memory")
    cli_run.fail_dir(tmp_path, False, err, {"stage": "score"})
    record = json.loads((tmp_path / "failed.json").read_text())
    assert record["stage"] == "score" and "out of memory" in record["error"]


def test_cache_ls_shows_the_parts_that_tell_entries_apart(tmp_path, monkeypatch):
    from cscore.scorers.engine.stats import TokenStats

    cache = StatsCache(tmp_path / "stats")
    offsets = np.array([0, 2])
    st = TokenStats(temperatures=np.array([1.0]), offsets=offsets, token_ids=np.array([5, 6]),
                    logp=np.zeros((1, 2)), logp_max=np.zeros((1, 2)))
    for budget in (1024, 4096):
        parts = {"model": {"kind": "files", "name": "m"}, "heads": {"expert": None}, "token_budget": budget,
                 "padding_side": "right", "ids": "a" * 64}
        cache.save(f"{budget:064x}", {"expert": st}, parts, extra={"models": ["expert: m"]})
    console = Console(record=True, width=200)
    monkeypatch.setenv("CSCORE_CACHE", str(tmp_path / "base"))
    cmd_ls(cache, console)
    text = console.export_text()
    assert "token_budget" in text and "1024" in text and "4096" in text
    assert "padding_side" not in text  # the same in both: not a column


def test_cache_lists_and_clears_converted_models(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CSCORE_CACHE", str(tmp_path))
    monkeypatch.delenv("CSCORE_STATS_CACHE", raising=False)
    model = tmp_path / "models" / "m-0123-c3-tf5"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"x" * 2048)
    (tmp_path / "models" / "m-0123-c3-tf5.lock").touch()
    cache_main(["ls"])
    out = capsys.readouterr().out
    assert "m-0123-c3-tf5" in out and ".lock" not in out and str(tmp_path / "stats") in out
    cache_main(["clear", "--models"])
    assert not any((tmp_path / "models").iterdir())


def test_the_run_directory_contract(two_runs, tmp_path):
    from cscore import rundir
    from cscore.rundir import find_runs

    root, _, _ = two_runs
    assert rundir.is_complete(root / "a")
    metrics = rundir.read_metrics(root / "a")
    assert metrics["schema"] == rundir.METRICS_SCHEMA and set(rundir.METRICS_KEYS) <= set(metrics)
    scores = pd.read_parquet(root / "a" / rundir.SCORES)
    n_scored = scores[f"{rundir.N_SCORED}expert"].to_numpy()
    assert (n_scored == scores["hypothesis_tokens"].to_numpy()).all()  # skip_first=false: every token counts
    # the mean log-likelihood is the sum score divided by the count (norm=sum, t=1)
    np.testing.assert_allclose(scores[f"{rundir.MEAN_LOGP}expert"] * n_scored, scores["score.expert"], rtol=1e-12)
    # a failed run is listed as failed, never read as complete
    failed = tmp_path / "failed_run"
    failed.mkdir()
    (failed / rundir.CONFIG).write_text((root / "a" / rundir.CONFIG).read_text())
    (failed / rundir.METRICS).write_text('{"n_items": 3}')  # torn / partial: not complete
    cli_run.fail_dir(failed, False, RuntimeError("CUDA out of memory"), {"stage": "score"})
    (run,) = find_runs(tmp_path)
    assert not run.complete and run.failure["stage"] == "score"


def test_nonfinite_hint_names_the_cd_score_setting_only_where_it_applies():
    from cscore.config.run import RunConfig
    from cscore.run.summary import nonfinite_hint
    from cscore.scorers import methods

    run = RunConfig(method=methods.get("cd_score").Params(outside=float("-inf")))
    assert "method.outside" in nonfinite_hint(run, "score.cd_score")
    assert nonfinite_hint(run, "score.expert") == ""  # a comparison row: not this setting's doing
    run.method.outside = -50.0
    assert nonfinite_hint(run, "score.cd_score") == ""
    assert nonfinite_hint(RunConfig(method=methods.get("contrast").Params()), "score.contrast") == ""


CTRL_C_PROGRAM = '''
import os, signal, sys, time
from cscore.cli import main as cli

def dispatch(argv):
    if argv == ["exec"]:  # dataclasses and namedtuple build methods with exec/eval of a string
        exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nx = sum(range(10**6))\\n")
    else:
        import ctrl_c_module  # sends the signal half-way through its own import
        print("imported", ctrl_c_module.DONE, flush=True)
    time.sleep(30)
    print("not interrupted", flush=True)

cli.dispatch = dispatch
sys.argv = ["cscore", sys.argv[1]]
cli.main()
'''


@pytest.mark.parametrize("where", ["exec", "import"])
def test_ctrl_c_inside_exec_or_an_import_is_still_exit_130(tmp_path, where):
    """A Ctrl-C that lands in code run from a string (CPython 3.11 then dies by SIGINT, exit -2, after
    our exit 130 when run with ``python -m``) or in an import (a C extension's init can abort) is
    raised once that code is done."""
    (tmp_path / "ctrl_c_program.py").write_text(CTRL_C_PROGRAM)
    (tmp_path / "ctrl_c_module.py").write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nx = sum(range(10**6))\nDONE = True\n"
        "print('module done', flush=True)\n")  # still inside the import: the interrupt waits for it
    done = subprocess.run([sys.executable, "-m", "ctrl_c_program", where], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, (done.returncode, done.stdout, done.stderr)
    assert "not interrupted" not in done.stdout and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("cscore: error: interrupted")
    if where == "import":  # the module finished importing before the interrupt (which may then land
        assert "module done" in done.stdout  # anywhere after it, even inside the program's next print)
