"""Models that cannot load here stop `cscore run` in one line before any data loads: a hub model
with the hub unreachable (decided once, no retries), a folder without a model, a text file given
as gguf:, and a runtime.max_length no prompt fits. A hub model in the local hub cache still runs
with the hub unreachable."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from cscore.data.demo import DEMO_FILE

# an endpoint nothing listens on (port 9, discard): the hub is unreachable on any machine
DEAD_HUB = "http://127.0.0.1:9"
LOADED_DATA = "data demo:"  # the first line load_stage logs


def one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cscore: error: "), res.stdout + res.stderr
    return lines[0]


def stopped_before_data(res, cwd: Path) -> None:
    assert LOADED_DATA not in res.stdout + res.stderr and "Traceback" not in res.stderr
    assert not (cwd / "outputs").exists()  # no run directory


def hub_env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return dict(env, HF_ENDPOINT=DEAD_HUB, HF_HUB_CACHE=str(tmp_path / "hub"), **extra)


def test_a_hub_pair_with_the_hub_unreachable_is_one_line_naming_the_keys(tmp_path, cscore_cli):
    start = time.perf_counter()
    res = cscore_cli("run", "method=contrast", "pair=qwen_3b_0.5b", cwd=tmp_path, env=hub_env(tmp_path), timeout=120)
    seconds = time.perf_counter() - start
    line = one_error_line(res)
    assert res.returncode == 2
    assert line.startswith("cscore: error: set pair.expert.path= and pair.amateur.path= to a local model directory "
                           "or a gguf: spec"), line
    assert "Qwen/Qwen2.5-3B-Instruct and Qwen/Qwen2.5-0.5B-Instruct are hub models not in the local hub cache" in line
    assert f"hub is unreachable ({DEAD_HUB}: " in line
    assert "Retrying" not in res.stderr and "thrown while requesting" not in res.stderr
    stopped_before_data(res, tmp_path)
    assert seconds < 60, seconds  # was 65 s of retries after the data loaded; now one refused connection


def test_offline_by_choice_names_the_variable(tmp_path, cscore_cli):
    env = hub_env(tmp_path, HF_HUB_OFFLINE="1")
    res = cscore_cli("run", "method=single", "pair=qwen_3b_0.5b", cwd=tmp_path, env=env, timeout=120)
    line = one_error_line(res)
    assert res.returncode == 2 and "set pair.expert.path= to a local model directory" in line
    assert "pair.amateur.path" not in line  # method=single reads the expert only
    assert "(HF_HUB_OFFLINE is set)" in line
    assert line.endswith("set HF_HOME (or HF_HUB_CACHE) to the folder that holds them, and HF_HUB_OFFLINE=1"), line
    stopped_before_data(res, tmp_path)


def hub_cache_with(model_dir: str, repo_id: str, root: Path) -> Path:
    """A local hub cache (huggingface_hub's layout) holding ``model_dir`` as ``repo_id`` at main."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / ("models--" + repo_id.replace("/", "--"))
    shutil.copytree(model_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return root


def demo_rows(folder: Path, n: int) -> Path:
    path = folder / "demo16.jsonl"
    path.write_text("\n".join(DEMO_FILE.read_text().splitlines()[:n]) + "\n")
    return path


@pytest.mark.slow
def test_a_cached_hub_model_runs_with_the_hub_unreachable(tiny_dirs, tmp_path, cscore_cli):
    hub_cache_with(tiny_dirs.expert, "tiny-org/tiny-expert", tmp_path / "hub")
    res = cscore_cli("run", "method=single", "pair.expert.path=tiny-org/tiny-expert", "runtime.progress=false",
                     f"data.path={demo_rows(tmp_path, 16)}", f"hydra.run.dir={tmp_path / 'run'}",
                     f"cache.dir={tmp_path / 'stats'}", cwd=tmp_path, env=hub_env(tmp_path), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Retrying" not in res.stderr and "thrown while requesting" not in res.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n_items"] == 16 and metrics["models"]["expert"]["spec"] == "tiny-org/tiny-expert"


@pytest.fixture
def not_models(tmp_path) -> dict:
    """A folder with a config.json and no weights, an empty folder, a text file named x.gguf."""
    config_only = tmp_path / "config_only"
    config_only.mkdir()
    (config_only / "config.json").write_text(json.dumps({"model_type": "llama"}))
    empty = tmp_path / "empty"
    empty.mkdir()
    text = tmp_path / "notes.gguf"
    text.write_text("these are my notes, not a model\n")
    return {"config_only": config_only, "empty": empty, "text": text}


@pytest.mark.parametrize("override, message", [
    ("pair.expert.path={config_only}", "pair.expert.path={config_only}: {config_only} has a config.json but no "
                                       "weight file"),
    ("pair.expert.path={empty}", "pair.expert.path={empty}: {empty} has no config.json"),
    ("pair.expert.path=gguf:{text}", "pair.expert.path=gguf:{text}: {text} is not a GGUF file (it starts with "
                                     "b'thes', not the GGUF magic b'GGUF')"),
    ("pair.amateur.path={config_only}", "pair.amateur.path={config_only}: {config_only} has a config.json"),
    ("pair.expert.path=gguf:no-such-model", "pair.expert.path=gguf:no-such-model: unknown packaged GGUF "
                                            "'no-such-model'"),
])
def test_a_model_that_is_not_there_is_one_line_before_the_data(override, message, not_models, tmp_path, cscore_main):
    res = cscore_main("run", override.format(**not_models), cwd=tmp_path)
    line = one_error_line(res)
    assert res.returncode == 2 and message.format(**not_models) in line, line
    stopped_before_data(res, tmp_path)


def test_a_max_length_no_prompt_fits_is_one_line_before_the_data(tiny_dirs, tmp_path, cscore_main):
    args = [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            "pair.amateur.early_exit=null"]
    res = cscore_main("run", *args, "runtime.max_length=8", cwd=tmp_path)
    line = one_error_line(res)
    assert res.returncode == 2 and line.startswith("cscore: error: runtime.max_length=8 is too small for any item: "
                                                   "the shortest prompt this run can build"), line
    assert "raise runtime.max_length" in line and "(the summarization template, " in line  # demo's task
    stopped_before_data(res, tmp_path)
    # a template chosen in the config is the only candidate: its own length decides
    res = cscore_main("run", *args, "runtime.max_length=12", "data.template=summarization", cwd=tmp_path)
    line = one_error_line(res)
    assert (
        "runtime.max_length=12 is too small" in line and "(the summarization template, with its source removed)" in line
    )
    stopped_before_data(res, tmp_path)


def test_a_max_length_that_fits_the_shortest_prompt_goes_on_to_the_data(tiny_dirs, tmp_path, cscore_main):
    """The check bounds from below: a limit the template leaves room in passes, and the data loads
    (here: a data file that is not valid JSON, the next thing to fail)."""
    (tmp_path / "d.jsonl").write_text("not json\n")
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", "method=single", "runtime.max_length=64",
                      "data.template=summarization", f"data.path={tmp_path / 'd.jsonl'}",
                      f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert res.returncode == 2 and "d.jsonl:1:1: not valid JSON" in res.stderr, res.stderr
