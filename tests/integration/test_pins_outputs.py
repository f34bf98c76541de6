"""Output pins: what a run directory holds, per method, against tests/integration/pins/outputs/<variant>.json
(issue 21: keep every output column through the rebuild).

The real ``cscore run`` on the tiny random pair (conftest ``tiny_dirs``, here with a chat template
so that the judges can run) over 12 demo rows (3 documents x 4 systems), on the CPU: one multirun
for the model methods (single, ensemble, contrast, contrast_released, division, cd_score, cdm,
cd_judge, cd_judge_released; one process, the statistics shared through the cache) and one run of
the bleu + chrf baselines. Pinned per run: scores.parquet's columns and dtypes, correlations.csv's
columns and row labels (its text columns, one ``a | b | c`` line per row), the key tree of
metrics.json (keys and JSON value types, not values) and the run directory's file listing.
``speed.peak_gpu_mb`` is left out of the tree: it is there only when torch sees a CUDA device; ``mfu``
(run and passes) is pinned as null, its value on a CPU (a number on a CUDA device of known peak).

A mismatch prints a unified diff. Regenerate after an intended change:
``CSCORE_UPDATE_PINS=1 python -m pytest tests/integration/test_pins_*.py``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cscore.tests.support.cli import run_main

PINS = Path(__file__).parent / "pins" / "outputs"
MODEL_METHODS = ["single", "ensemble", "contrast", "contrast_released", "division", "cd_score", "cdm", "cd_judge",
                 "cd_judge_released"]
BASELINES = "[bleu,chrf]"
CHAT = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}")
MACHINE_KEYS = {("speed", "peak_gpu_mb")}  # present only when torch sees a CUDA device

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chat_pair(tiny_dirs, tmp_path_factory):
    """The tiny pair, each with a chat template (the judge prompts go through it)."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("pins_models")
    for name in ("expert", "amateur"):
        shutil.copytree(getattr(tiny_dirs, name), root / name)
        tok = AutoTokenizer.from_pretrained(root / name)
        tok.chat_template = CHAT
        tok.save_pretrained(root / name)
    return root


@pytest.fixture(scope="module")
def runs(chat_pair, tmp_path_factory, cscore_cli) -> dict[str, Path]:
    """{variant: run directory} of every pinned method (cd_judge_released, which reads the released
    prompts, only where ../shared is: ``test_run_outputs_are_pinned`` skips it elsewhere)."""
    from cscore.data import paths
    from cscore.data.demo import DEMO_FILE

    root = tmp_path_factory.mktemp("pins_runs")
    lines = [json.loads(line) for line in Path(DEMO_FILE).read_text().splitlines() if line.strip()]
    docs = sorted({r["doc_id"] for r in lines})[:3]
    rows = [r for d in docs for r in [r for r in lines if r["doc_id"] == d][:4]]
    (root / "demo12.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = [f"pair.expert.path={chat_pair / 'expert'}", f"pair.amateur.path={chat_pair / 'amateur'}",
              "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", "runtime.device=cpu",
              f"data.path={root / 'demo12.jsonl'}", f"cache.dir={root / 'stats'}"]
    methods = [m for m in MODEL_METHODS if m != "cd_judge_released" or paths.shared_data_dir() is not None]
    res = cscore_cli("run", "-m", *common, f"method={','.join(methods)}", f"hydra.sweep.dir={root / 'sw'}",
                     cwd=root, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_main("run", *common, "method=baseline", f"baseline={BASELINES}", f"hydra.run.dir={root / 'bl'}",
                   cwd=root)  # in this process: the multirun above was the fresh one
    assert res.returncode == 0, res.stdout + res.stderr
    out = {"baseline_bleu_chrf": root / "bl"}
    for d in sorted((root / "sw").iterdir()):
        if (d / "metrics.json").is_file():  # named by the job's method= override
            given = yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text())
            out[next(o.split("=", 1)[1] for o in given if o.startswith("method="))] = d
    return out


def shape(value):
    """The key tree of JSON data: dicts keep their keys, lists the distinct shapes of their
    items, scalars become their type's name."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        seen = []
        for item in map(shape, value):
            if item not in seen:
                seen.append(item)
        return seen
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def outputs_record(run: Path) -> dict:
    scores = pd.read_parquet(run / "scores.parquet")
    corr = pd.read_csv(run / "correlations.csv")
    labels = [c for c in corr.columns if corr[c].dtype == object or str(corr[c].dtype).startswith("str")]
    metrics = json.loads((run / "metrics.json").read_text())
    for section, key in MACHINE_KEYS:
        metrics.get(section, {}).pop(key, None)
    speed = metrics.get("speed", {})
    for part in [speed, *(speed.get("passes") or {}).values()]:
        if "mfu" in part:  # a number on a CUDA device of known peak, else null: pinned as present
            part["mfu"] = None
    return {"scores.parquet": {c: str(t) for c, t in scores.dtypes.items()},
            "correlations.csv": {"columns": list(corr.columns), "label_columns": labels,
                                 "rows": [" | ".join(r) for r in corr[labels].astype(str).values.tolist()]},
            "metrics.json": shape(metrics),
            "files": sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())}



@pytest.mark.parametrize("variant", [*MODEL_METHODS, "baseline_bleu_chrf"])
def test_run_outputs_are_pinned(runs, variant, pin_snapshot, request):
    if variant == "cd_judge_released":
        request.getfixturevalue("shared")  # the released prompts: skipped without ../shared (failed under CI)
    assert variant in runs, f"no finished run of {variant}: {sorted(runs)}"
    record = outputs_record(runs[variant])
    pin_snapshot(PINS / f"{variant}.json", json.dumps(record, indent=1) + "\n")
