"""The typed config flows (issue 31 item 1): the variants are planned from the method's typed
``Params`` (their records keep the values as written), the run's pass settings are one frozen
``PassOptions`` built once (its own cache-key parts, ``auto`` resolved in one place), the configs
are composed through one helper, and only the typed boundary reads what the user wrote."""

from __future__ import annotations

import dataclasses
import re

import pytest

from cscore.cli.compose import composed
from cscore.config.run import Runtime
from cscore.run.typed import typed, typed_method
from cscore.run.variants import plan
from cscore.scorers import methods
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.store.runner import ArrayTask, InProcess
from cscore.tests.support import REPO

ROOT = REPO


def test_rows_read_the_typed_params_and_record_the_values_as_written():
    written = {"name": "contrast", "variant": "contrast", "gamma": 1, "t_exp": 1, "t_ama": 1.5, "floor": 1e-30,
               "clamp": None, "norm": "mean", "skip_first": True}
    p = typed_method(written)
    rows = plan(p, baseline_t=2, rows=["expert", "amateur", "ensemble"], written=written)
    assert [v.name for v in rows] == ["expert", "amateur", "ensemble", "contrast"]
    main = rows[-1]
    assert main.params is p and isinstance(p.gamma, float) and p.gamma == 1.0
    # the record: what metrics.json writes, as written (gamma=1 stays 1), in config order
    assert main.record == {k: v for k, v in written.items() if k not in ("name", "variant")}
    assert type(main.record["gamma"]) is int
    expert = rows[0]
    assert expert.record == {"model": "expert", "t": 2, "norm": "mean", "skip_first": True, "clamp": None}
    assert (expert.params.model, expert.params.t, expert.params.norm, expert.params.skip_first) == (
        "expert", 2, "mean", True)
    ens = rows[2]
    assert ens.record == {"gamma": 0.5, "t_exp": 2, "t_ama": 2, "norm": "mean", "skip_first": True, "clamp": None,
                          "floor": 1e-30}
    assert ens.settings() == {"gamma": 0.5, "t_exp": 2, "t_ama": 2, "floor": 1e-30, "clamp": None, "norm": "mean",
                              "skip_first": True}
    assert main.temperatures() == {1.0, 1.5} and expert.temperatures() == {2.0}
    # without a record of what was written, the records are the typed values
    assert plan(p)[-1].record["gamma"] == 1.0


def test_a_run_s_method_is_typed_and_planned_once_and_passed_on(monkeypatch):
    """``typed`` types the method section and plans its rows once (no memo: another call types
    and plans again); the checks, the kinds and the signature read ``RunConfig.method_plan``."""
    from cscore.run import kinds, pair_check, stages, variants
    from cscore.run.validate import check_amateur

    real, calls = variants.plan, []
    monkeypatch.setattr(variants, "plan", lambda *a, **k: calls.append(a) or real(*a, **k))
    run = typed(composed("config", ["method=contrast", "method.variant=c40", "method.gamma=1", "baselines.t=2"]))
    assert len(calls) == 1
    rows = kinds.of_method("contrast").rows(run)
    check_amateur(run)
    assert "expert" in pair_check.needed_models(run) and len(calls) == 1
    assert variants.models_needed(rows) == ["expert", "amateur"]
    assert [v.name for v in rows] == ["expert", "amateur", "ensemble", "c40"]
    assert rows[-1].params is run.method and rows[0].params.t == 2.0 and rows[-1].record["gamma"] == 1
    assert stages.method_params(run.method_plan.written).startswith("gamma=1,")
    again = typed(composed("config", ["method=contrast", "method.variant=c40", "method.gamma=1"]))
    assert len(calls) == 2 and again.method is not run.method and again.method == run.method


def test_a_judge_plans_its_rows_with_whose_judgement_each_is():
    written = dict(methods.defaults("cd_judge"), name="cd_judge", variant="cd", aspect="coherence")
    rows = plan(typed_method(written), written=written)
    assert [(v.name, v.who) for v in rows] == [("expert", "main"), ("amateur", "asst"), ("cd", "contrast")]
    assert all(v.record["who"] == v.who and v.params.lam == 0.1 for v in rows)


def job_coordinator(run, tmp_path):
    """The coordinator a job of ``run`` is handed beside its config (``workers.sharded``, no runtime.devices)."""
    from cscore.run import workers

    with workers.sharded(run, [], tmp_path, {}) as shards:
        return shards


def test_the_run_config_is_typed_once_with_its_pass_options(tmp_path, monkeypatch):
    from cscore.run import workers

    for name in (workers.WORKER_ENV, "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    c = composed("config", ["runtime.token_budget=auto", "runtime.padding_side=left", "method=contrast",
                            "method.gamma=1"])
    run = typed(c)
    assert run.method.gamma == 1.0 and type(run.method_plan.written["gamma"]) is int
    assert run.passes == PassOptions(token_budget="auto", padding_side="left", prefix_sharing=True,
                                     max_length=run.runtime.max_length, device="auto", dtype="auto", threads="auto")
    assert job_coordinator(run, tmp_path) == InProcess(count=1, index=None, merge=True)
    typed_sharded = typed(composed("config", ["runtime.token_budget=auto", "runtime.padding_side=left",
                                              "runtime.shards=3", "runtime.shard=1"]))
    assert job_coordinator(typed_sharded, tmp_path) == InProcess(3, 1)  # the coordinator, not a pass option
    monkeypatch.setenv(workers.WORKER_ENV, "1")  # the environment is read when the job starts, not when typed
    assert job_coordinator(typed_sharded, tmp_path) == ArrayTask(3, 1, merge=False)
    sharded = typed_sharded.passes
    assert sharded.key_parts(shared=True) == run.passes.key_parts(shared=True)  # not a key part
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.passes.padding_side = "right"  # type: ignore[misc]


def test_runtime_devices_are_resolved_where_the_run_is_typed(tmp_path, monkeypatch):
    """runtime.devices becomes the shards and the device once, in ``typed``: the run's PassOptions and
    the job's coordinator are built from the resolved runtime; ``launch.check`` only checks (ConfigError)."""
    from cscore.errors import ConfigError
    from cscore.run import kinds, launch, workers

    for name in (workers.WORKER_ENV, "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    two = typed(composed("config", ["runtime.devices=[cpu,cpu]", f"cache.dir={tmp_path}"]))
    rt = two.runtime
    assert (rt.shards, rt.shard, rt.devices, rt.device) == (2, None, ["cpu", "cpu"], "cpu")
    assert two.passes == PassOptions.of(rt) and two.passes.device == "cpu"
    assert workers.coordinator(two.runtime) == InProcess(2, None)  # cscore cdm's, after its workers
    assert launch.check_settings(two) is None and launch.check(two, kinds.of_method("contrast")) is None
    one = typed(composed("config", ["runtime.devices=[cpu]"]))  # one device: the pass here, no worker
    assert (one.runtime.shards, one.runtime.devices, one.runtime.device, one.passes.device) == (1, None, "cpu", "cpu")
    assert job_coordinator(one, tmp_path) == InProcess(1, None) and not job_coordinator(one, tmp_path).on
    bad = typed(composed("config", ["runtime.devices=[cpu,cpu]", "runtime.shards=3"]))  # as given: the check names it
    assert (bad.runtime.shards, bad.runtime.devices, bad.passes.device) == (3, ["cpu", "cpu"], "auto")
    with pytest.raises(ConfigError, match=r"^runtime\.shards=3 but runtime\.devices lists 2 devices: one shard per"):
        launch.check_settings(bad)
    with pytest.raises(ConfigError, match=r"^runtime\.shard is the one shard this process computes"):
        launch.check_settings(typed(composed("config", ["runtime.devices=[cpu]", "runtime.shard=0"])))


def test_pass_options_give_their_key_parts():
    opts = PassOptions.of(Runtime(token_budget=512, padding_side="left"))
    assert opts.key_parts(shared=False) == {"token_budget": 512, "padding_side": "left"}
    assert opts.key_parts(shared=True) == {"token_budget": 512, "padding_side": "left", "prefix_sharing": True}
    assert opts.budget_for(model=None, longest_row=10) == 512  # a number is the budget: no model is asked
    assert PassOptions(device="cpu").torch_device().type == "cpu"


def test_the_python_api_s_keywords_make_one_pass_request():
    """``ModelPair.statistics``' shim: ``request``, then ``temperatures`` / ``models``, then keywords that
    name a field of ``PassRequest`` or of its ``PassOptions``; anything else is a TypeError naming it."""
    from cscore.scorers.api import DEFAULT_TEMPERATURES, PassRequest, request_of
    from cscore.scorers.store.cache import StatsCache

    assert request_of(None, None, None, {}) == PassRequest()
    assert PassRequest().temperatures == DEFAULT_TEMPERATURES and PassRequest().options == PassOptions()
    base = PassRequest([0.5], ["expert"], PassOptions(token_budget=64))
    cache = StatsCache(ROOT / "no-such-cache-dir")  # not created: nothing is written
    got = request_of(base, [1.0, 2.0], None, {"cache": cache, "padding_side": "left"})
    assert got == PassRequest([1.0, 2.0], ["expert"], PassOptions(token_budget=64, padding_side="left"), cache)
    again = request_of(base, None, ["amateur"], {"options": PassOptions(token_budget=8), "max_length": 99})
    assert again.options == PassOptions(token_budget=8, max_length=99) and again.models == ["amateur"]
    assert again.temperatures == [0.5]
    with pytest.raises(TypeError, match="'share_prefix'.*cache.*token_budget"):
        request_of(None, None, None, {"share_prefix": True})


def test_one_place_opens_hydra_s_config_module():
    """Read from the package's own folders (pyproject's setuptools packages), so a copy of the tree
    that is no git checkout (a ``git archive``, an sdist) checks the same files."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = [ROOT.joinpath(*name.split(".")[1:]) for name in packages]
    hits = sorted(str(f.relative_to(ROOT)) for d in folders for f in d.glob("*.py")
                  if "initialize_config_module" in f.read_text())
    assert hits == ["cli/compose.py"]


def test_only_the_typed_boundary_reads_what_the_user_wrote():
    """The method section as written is read where the config is typed (run/typed.py hands it to
    ``variants.method_plan``, which keeps the rows' records and the parameters as written) and the
    plan's ``written`` by the signature (run/stages.py) only; nothing reads the method's
    parameters as a dict."""
    pattern = re.compile(r"\.written\b|run\.params|params\[\"")
    hits = set()
    for folder in ("scorers", "config", "training", "run", "cli"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.relative_to(ROOT).parts[:2] == ("scorers", "baselines"):
                continue  # the baselines' own settings (issue 31 item 4 makes them Params)
            if pattern.search(path.read_text()):
                hits.add(str(path.relative_to(ROOT)))
    assert hits == {"run/stages.py"}
