"""CDM's passes sharded (runtime.shards / runtime.shard / runtime.devices, docs/scaling.md): the
momentum pass of `cscore cdm train` (a pooler) goes through the sharded statistics pass and merges
into the unsharded cache entry; its momentum, the trained pooler and cscore_discriminator.json are
bit-identical for 1, 2 and 3 shards. `cscore cdm generate` deals its positives to the shards in
whole groups and merges one negatives.jsonl byte-identical to the unsharded one. The token kinds of
`cscore run method=cdm | cdm_classifier | cdm_gen` shard through the token pass (slow tier). A
stage that cannot shard (training a transformers classifier) refuses in one line before torch loads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cscore import rundir
from cscore.cli import cdm_cmd
from cscore.errors import ShardsPending
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.checkpoint import PARTIAL_DIR
from cscore.scorers.store.runner import Pending
from cscore.tests.support.cli import assert_same_scores, score_columns

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TIMING = ("created", "updated", "seconds")  # the fields of the stage files that say when, not what


def pair_args(tiny_dirs) -> list[str]:
    return [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", "runtime.threads=1",
            "runtime.token_budget=128"]


@pytest.fixture(scope="module")
def cdm(tiny_dirs, tmp_path_factory):
    """Four demo documents, three summaries each (12 positives), one negative each, generated
    unsharded; then a pooler trained on them unsharded (its own statistics cache)."""
    from cscore.data.registry import load_config

    root = tmp_path_factory.mktemp("cdm_shards")
    demo, _ = load_config({"name": "demo"})
    demo = demo[demo["group"].isin(sorted(set(demo["group"]))[:4])].groupby("group").head(3)
    table = root / "table.jsonl"
    demo[["id", "group", "system", "source", "hypothesis", "reference", "human.overall"]].to_json(
        table, orient="records", lines=True)
    common = [*pair_args(tiny_dirs), "data=table", f"data.path={table}", "data.task=summarization"]
    gen = [*common, "cdm.generate.max_span=4", f"cache.dir={root / 'c_gen'}"]
    generate(gen, root / "gen")
    train = [*common, f"cdm.train.input={root / 'gen'}"]
    train_in(train, root / "pooler", root / "c1")
    return SimpleNamespace(root=root, common=common, gen=gen, train=train, table=demo)


def generate(args: list[str], out: Path, *more: str) -> None:
    cfg, ov = cdm_cmd.parse([*args, f"cdm.generate.out={out}", *more])
    cdm_cmd.generate(cfg, ov)


def train_in(args: list[str], out: Path, cache: Path, *more: str) -> None:
    cfg, ov = cdm_cmd.parse([*args, f"cdm.train.out={out}", f"cache.dir={cache}", *more])
    cdm_cmd.train(cfg, ov)


def without(record: dict, *drop: str) -> dict:
    return {k: v for k, v in record.items() if k not in drop}


def assert_same_provenance(a: Path, b: Path) -> None:
    x, y = (json.loads((p / "provenance.json").read_text()) for p in (a, b))
    assert x["complete"] and y["complete"]
    for r in (x, y):  # what differs is when, and how the command was told to run (its shards, its output)
        r["config"]["runtime"] = without(r["config"]["runtime"], "shards", "shard", "devices", "device")
        r["config"]["cdm"]["generate"].pop("out")
    assert without(x, *TIMING) == without(y, *TIMING)


def assert_same_discriminator(a: Path, b: Path) -> None:
    x, y = (json.loads((p / "cscore_discriminator.json").read_text()) for p in (a, b))
    for r in (x, y):
        r["config"].pop("out")  # the command's output directory, as given
    assert without(x, *TIMING) == without(y, *TIMING)
    assert x["pooler"]["weights"] and x["accuracy"]["held_out"]["n"] > 0


# --- cscore cdm generate ----------------------------------------------------------------------


def test_positives_are_dealt_in_whole_groups(cdm):
    from cscore.run import negatives as steps
    from cscore.training import negatives

    positives = negatives.select_positives(cdm.table, "hypothesis")
    for count in (1, 2, 3, 5):
        owner = steps.owners(positives, count)
        per_group = pd.Series(owner).groupby(positives["group"].to_numpy()).nunique()
        assert (per_group == 1).all()  # a group never splits
        assert set(owner) == set(range(min(count, 4)))  # four groups: every shard gets one while there are enough
        assert np.array_equal(owner, steps.owners(positives, count))


@pytest.mark.parametrize("count", [2, 3])
def test_generate_sharded_is_byte_identical(cdm, tmp_path, count):
    """Array tasks, one shard each (each but the last leaves the stage pending, naming the shards
    missing); the last merges negatives.jsonl and provenance.json."""
    out = tmp_path / "gen"
    for k in range(count - 1):
        with pytest.raises(ShardsPending) as err:
            generate(cdm.gen, out, f"runtime.shards={count}", f"runtime.shard={k}")
        assert err.value.missing == list(range(k + 1, count))
        assert not (out / "negatives.jsonl").exists()
    generate(cdm.gen, out, f"runtime.shards={count}", f"runtime.shard={count - 1}")
    assert (out / "negatives.jsonl").read_bytes() == (cdm.root / "gen" / "negatives.jsonl").read_bytes()
    assert_same_provenance(out, cdm.root / "gen")
    assert not (out / ".shards").exists()  # the shards' files and marks removed


def test_generate_every_shard_in_one_process_resumes_an_unsharded_run(cdm, tmp_path):
    """An unsharded run killed after 5 positives (the 6th cut mid-line), then every shard of 3 in one
    process: the earlier lines are kept, the rest merged in the positives' order, as the unsharded
    run would have appended them."""
    out = tmp_path / "gen"
    shutil.copytree(cdm.root / "gen", out)
    full = (out / "negatives.jsonl").read_bytes()
    lines = full.splitlines(keepends=True)
    (out / "negatives.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][:30])
    prov = json.loads((out / "provenance.json").read_text())
    (out / "provenance.json").write_text(json.dumps({**prov, "complete": False}))
    generate(cdm.gen, out, "runtime.shards=3")
    assert (out / "negatives.jsonl").read_bytes() == full
    assert_same_provenance(out, cdm.root / "gen")
    mtime = (out / "negatives.jsonl").stat().st_mtime_ns
    generate(cdm.gen, out, "runtime.shards=2", "runtime.shard=1")  # finished: nothing to do, nothing rewritten
    assert (out / "negatives.jsonl").stat().st_mtime_ns == mtime


def generate_parts(args: list[str], out: Path, coordinator, *more: str):
    """``cscore cdm generate``'s sharded step (``run/negatives.py`` ``make_parts``) run in this process
    with ``coordinator`` (the fake ones of tests/support/coordinator.py): what ``cdm_cmd.generate``
    does, the coordinator given rather than read from the settings and the environment."""
    from cscore.run import negatives as steps
    from cscore.run.stages import load_stage
    from cscore.run.typed import resolved
    from cscore.training import artifacts, negatives

    cfg, ov = cdm_cmd.parse([*args, f"cdm.generate.out={out}", f"runtime.shards={coordinator.count}", *more])
    g = cdm_cmd.checked(cfg.cdm.generate, cdm_cmd.GENERATE_PARAMS, "cdm.generate")
    run = cdm_cmd.sharding("generate", cfg, ov)
    job = negatives.open_job(run, g, artifacts.out_dir(g["out"], "cdm", "generate"), resolved(cfg))
    return steps.make_parts(job, run, steps.positives_of(load_stage(run).examples, g), coordinator)


@pytest.mark.parametrize("damage", ["missing", "cut"])
def test_generate_a_lost_shard_is_run_again_by_the_process_allowed_to(cdm, tmp_path, damage):
    """A shard marked done whose part is missing or cut short when the merge reads it: the parent
    of runtime.devices (it may compute any shard) runs it again and merges the unsharded
    negatives.jsonl; an array task that does not own it leaves it pending, and the shard's own
    task then runs it again and merges the same file."""
    from cscore.rundir import SHARDS
    from cscore.scorers.store.runner import InProcess
    from cscore.tests.support.coordinator import Scripted, ScriptedParent

    def lose(out: Path, k: int) -> None:
        part = out / SHARDS / f"s{k:03d}of002.jsonl"
        assert part.read_text().count("\n") >= 2  # two groups, three positives each
        part.unlink() if damage == "missing" else part.write_bytes(part.read_bytes()[:-20])

    def worker(out: Path, k: int) -> None:
        assert isinstance(generate_parts(cdm.gen, out, InProcess(2, k, merge=False)), Pending)  # its part, no merge
        lose(out, k)

    want = (cdm.root / "gen" / "negatives.jsonl").read_bytes()
    out = tmp_path / "parent"
    parent = ScriptedParent(2, 0, play=lambda k: worker(out, k), comes=(1,))
    assert not isinstance(generate_parts(cdm.gen, out, parent), Pending)
    assert parent.waits == [("cdm generate", [1])]  # shard 1 came (then lost its part); the parent ran it again
    assert (out / "negatives.jsonl").read_bytes() == want
    assert_same_provenance(out, cdm.root / "gen")

    out = tmp_path / "array"
    worker(out, 0)
    assert generate_parts(cdm.gen, out, Scripted(2, 1)) == Pending([0])  # shard 0's, not this task's to redo
    assert not (out / "negatives.jsonl").exists()
    assert not isinstance(generate_parts(cdm.gen, out, Scripted(2, 0)), Pending)  # its own task: run again, merged
    assert (out / "negatives.jsonl").read_bytes() == want
    assert_same_provenance(out, cdm.root / "gen")


# --- cscore cdm train: the momentum pass --------------------------------------------------------


def test_momentum_statistics_are_bit_identical_for_1_2_3_shards(cdm, tiny_dirs, tmp_path):
    from cscore.scorers.api import ModelPair
    from cscore.scorers.engine.pass_options import PassOptions
    from cscore.scorers.store.runner import InProcess
    from cscore.training import discriminator

    items, _ = discriminator.training_items(cdm.root / "gen")
    prompts, texts = [i["prompt"] for i in items], [i["text"] for i in items]
    pair = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float32")

    def momentum(cache_root: Path, sharding=None):
        return discriminator.momentum_sequences(pair, prompts, texts, 1.0, None, PassOptions(token_budget=128,
                                                max_length=1 << 30), StatsCache(cache_root, checkpoint_seconds=0),
                                                sharding or InProcess())

    want, want_stats = momentum(tmp_path / "one")
    for count in (2, 3):
        root = tmp_path / f"s{count}"
        for k in range(count - 1):
            pending = momentum(root, InProcess(count, k))
            assert isinstance(pending, Pending) and pending.missing == list(range(k + 1, count))
        got, stats = momentum(root, InProcess(count, count - 1))
        assert len(got) == len(want) == len(items)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))  # bit for bit, per item
        for role in ("expert", "amateur"):
            assert np.array_equal(stats.stats[role].logp, want_stats.stats[role].logp)
        assert StatsCache(root).keys() == StatsCache(tmp_path / "one").keys()  # the same entries, same keys
        assert not list((root / PARTIAL_DIR).rglob("*.npz"))
        rep = next(iter(stats.reports.values()))
        assert rep.shards == count and len(rep.shard_seconds) == count


def test_train_array_tasks_give_the_unsharded_discriminator(cdm, tmp_path, cscore_main, caplog):
    """`cscore cdm train runtime.shards=2 runtime.shard=1`, then `... runtime.shard=0`: the first says
    which shard is missing and the command that runs it; the last merges the momentum pass and
    trains; cscore_discriminator.json equals the unsharded one apart from its timing."""
    base = ["cdm", "train", *cdm.train, f"cdm.train.out={tmp_path / 'pooler'}", f"cache.dir={tmp_path / 'c2'}",
            "runtime.shards=2"]
    caplog.set_level("INFO")
    first = cscore_main(*base, "runtime.shard=1", cwd=tmp_path)
    said = first.stdout + first.stderr + caplog.text  # the line is logged (stderr, in a terminal)
    assert first.returncode == 0, said
    assert "shard 0 of 2 not done yet; cdm train is incomplete: `cscore cdm train" in said
    assert "runtime.shard=0`" in said and "Traceback" not in said
    assert not (tmp_path / "pooler" / "cscore_discriminator.json").exists()
    last = cscore_main(*base, "runtime.shard=0", cwd=tmp_path)
    assert last.returncode == 0, last.stdout + last.stderr
    assert_same_discriminator(tmp_path / "pooler", cdm.root / "pooler")
    assert StatsCache(tmp_path / "c2").keys() == StatsCache(cdm.root / "c1").keys()


# --- refusals and checks before anything loads ----------------------------------------------------

FRESH = """
import json, sys
from cscore.cli.main import main
try:
    main(json.loads(sys.argv[1]))
    code = 0
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


@pytest.mark.parametrize("more,shown", [
    (["generate", "runtime.shards=2", "runtime.shard=3"], "runtime.shard=3 but runtime.shards=2"),
    (["cdm.train.discriminator=/some/classifier", "runtime.shards=2"],
     "cscore cdm train with cdm.train.discriminator=/some/classifier trains a transformers classifier"),
    (["cdm.train.discriminator=/some/classifier", "runtime.devices=[cpu,cpu]"], "it cannot shard"),
    (["cdm.train.discriminator=/some/classifier", "runtime.devices=[cpu]"], "it cannot shard"),
    (["runtime.shards=2", "runtime.shard=2"], "runtime.shard=2 but runtime.shards=2: shards are 0 .. 1"),
    (["runtime.shard=0"], "runtime.shard=0 but runtime.shards=1"),
    (["runtime.shards=2", "cache.enabled=false"], "runtime.shards needs the statistics cache"),
    (["runtime.devices=[cpu,cpu]", "runtime.shards=3"], "runtime.shards=3 but runtime.devices lists 2 devices"),
])
def test_sharding_mistakes_stop_before_torch_loads(tmp_path, more, shown):
    argv = (["cdm", *more] if more[0] == "generate" else ["cdm", "train", "cdm.train.input=/no/such/gen", *more])
    res = subprocess.run([sys.executable, "-c", FRESH, json.dumps(argv)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"code": 2, "torch": False}, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and shown in lines[0], res.stderr


def test_generate_sharding_is_checked_and_needs_no_statistics_cache(cdm, tmp_path, cscore_main):
    res = cscore_main("cdm", "generate", "runtime.shards=2", "runtime.shard=3", cwd=tmp_path)
    assert res.returncode == 2 and "runtime.shard=3 but runtime.shards=2" in res.stderr, res.stderr
    out = tmp_path / "gen"  # its shards meet in its output directory: cache.enabled=false is fine
    generate(cdm.gen, out, "runtime.shards=2", "cache.enabled=false")
    assert (out / "negatives.jsonl").read_bytes() == (cdm.root / "gen" / "negatives.jsonl").read_bytes()


# --- end to end: worker processes, and the cdm kinds of cscore run --------------------------------


def cscore(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cscore.cli.main", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}, timeout=900)


@pytest.mark.slow
def test_cdm_stages_on_two_cpu_workers(cdm, tmp_path):
    """`runtime.devices=[cpu,cpu]`: a worker process computes shard 1, relayed as `shard 1: ...`;
    this process computes shard 0 and merges. generate: the unsharded negatives.jsonl, byte for
    byte; train: the unsharded cscore_discriminator.json apart from its timing. Three shards: the
    in-process tests above."""
    gen = cscore(["cdm", "generate", *cdm.gen, f"cdm.generate.out={tmp_path / 'gen'}",
                  "runtime.devices=[cpu,cpu]"], tmp_path)
    assert gen.returncode == 0, gen.stderr[-3000:]
    said = gen.stdout + gen.stderr
    assert "statistics: 2 shards on cpu, cpu" in said and all(f"shard {k}: " in said for k in range(2))
    assert (tmp_path / "gen" / "negatives.jsonl").read_bytes() == (cdm.root / "gen" / "negatives.jsonl").read_bytes()
    assert_same_provenance(tmp_path / "gen", cdm.root / "gen")
    train = cscore(["cdm", "train", *cdm.train, f"cdm.train.out={tmp_path / 'pooler'}",
                    f"cache.dir={tmp_path / 'c3'}", "runtime.devices=[cpu,cpu]"], tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    said = train.stdout + train.stderr
    assert all(f"shard {k}: " in said for k in range(2)) and "every shard done in" in said
    assert_same_discriminator(tmp_path / "pooler", cdm.root / "pooler")
    assert StatsCache(tmp_path / "c3").keys() == StatsCache(cdm.root / "c1").keys()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["cdm", "cdm_classifier", "cdm_gen"])
def test_cdm_kinds_of_cscore_run_shard_through_the_token_pass(cdm, tmp_path, cscore_main, method):
    """method=cdm (token kind), cdm_classifier (the pooler kind: its folds read the merged
    momentum) and cdm_gen (the discriminator kind, with the pooler trained above): two array tasks
    (in this process, one after another) give the unsharded run's scores and cdm_folds.json bit for bit."""
    more = {"cdm": [], "cdm_classifier": ["method.folds=2"],
            "cdm_gen": [f"model={cdm.root / 'pooler'}"]}[method]
    base = ["run", *cdm.common, f"method={method}", *more]
    one = cscore_main(*base, f"hydra.run.dir={tmp_path / 'one'}", f"cache.dir={tmp_path / 'c1'}", cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    argv = [*base, f"hydra.run.dir={tmp_path / 'many'}", f"cache.dir={tmp_path / 'c2'}", "runtime.shards=2"]
    for k in (1, 0):
        res = cscore_main(*argv, f"runtime.shard={k}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
    scored = (rundir.SCORE, rundir.MEAN_LOGP, rundir.N_SCORED)
    assert_same_scores(tmp_path / "one", tmp_path / "many", scored, more_than=1)
    assert f"score.{method}" in score_columns(tmp_path / "one", scored).columns
    speed = json.loads((tmp_path / "many" / "metrics.json").read_text())["speed"]
    assert speed["shards"] == 2 and all(len(s) == 2 for s in speed["shard_seconds"].values())
    if method == "cdm_classifier":
        folds = [json.loads((tmp_path / d / "cdm_folds.json").read_text()) for d in ("one", "many")]
        assert folds[0] == folds[1]
    assert StatsCache(tmp_path / "c2").keys() == StatsCache(tmp_path / "c1").keys()
