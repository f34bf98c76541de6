"""Correlations against hand-computed values and scipy."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cscore.metaeval.correlation import correlate, correlation_table, per_metric


def test_hand_computed_small_case():
    x, y = [1, 2, 3, 4], [1, 3, 2, 4]
    # Pearson: cov = 1.0 (sum of products of deviations 4 / n), var x = var y = 1.25 -> 0.8
    assert correlate(x, y, "pearson") == pytest.approx(0.8)
    # Spearman on ranks = same as Pearson here
    assert correlate(x, y, "spearman") == pytest.approx(0.8)
    # Kendall: 6 pairs, 5 concordant, 1 discordant -> (5 - 1) / 6
    assert correlate(x, y, "kendall") == pytest.approx(4 / 6)


def test_kendall_tau_b_with_ties():
    x, y = [1, 2, 2, 3], [1, 2, 3, 3]
    # concordant 4, discordant 0, ties only in x: 1, only in y: 1
    # tau-b = (C - D) / sqrt((C + D + Tx)(C + D + Ty)) = 4 / sqrt(5 * 5)
    assert correlate(x, y, "kendall") == pytest.approx(0.8)


def test_equals_scipy_on_random_vectors():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert correlate(x, y, "pearson") == pytest.approx(stats.pearsonr(x, y)[0])
    assert correlate(x, y, "spearman") == pytest.approx(stats.spearmanr(x, y)[0])
    assert correlate(x, y, "kendall") == pytest.approx(stats.kendalltau(x, y)[0])


def test_constant_vectors_give_nan_not_zero():
    assert math.isnan(correlate([1, 1, 1], [1, 2, 3], "pearson"))
    assert math.isnan(correlate([1, 2, 3], [5, 5, 5], "kendall"))
    assert math.isnan(correlate([1], [2], "spearman"))


def test_nonfinite_scores_are_left_out_and_counted():
    df = pd.DataFrame({"m": [1.0, 2.0, -np.inf, 4.0, 5.0], "h": [1.0, 2.0, 3.0, 4.0, 6.0]})
    table = correlation_table(df, ["m"], ["h"])
    row = table[table["correlation"] == "pearson"].iloc[0]
    assert row["n"] == 4 and row["n_nonfinite"] == 1
    assert row["value"] == pytest.approx(stats.pearsonr([1, 2, 4, 5], [1, 2, 4, 6])[0])


def test_wide_table_average_and_split():
    df = pd.DataFrame({"m": [1, 2, 3, 4, 1, 2, 3, 4], "a": [1, 2, 3, 4, 4, 3, 2, 1], "b": [1, 3, 2, 4, 1, 2, 3, 4],
                       "lp": ["x"] * 4 + ["y"] * 4})
    table = correlation_table(df, ["m"], ["a", "b"], split_by="lp")
    w = per_metric(table, "pearson")
    assert list(w.columns) == ["a@x", "a@y", "b@x", "b@y", "AVG"]
    assert w.loc["m", "a@x"] == pytest.approx(1.0) and w.loc["m", "a@y"] == pytest.approx(-1.0)
    assert w.loc["m", "AVG"] == pytest.approx((1 - 1 + 0.8 + 1) / 4)


def test_signature_round_trips_and_puts_the_version_last():
    import cscore
    from cscore.metaeval.signature import Signature

    sig = Signature({"data": "mqm", "n": 7935, "pair": "a|b", "expert": "gguf:smollm2", "version": "old"})
    text = str(sig)
    assert text == f"data:mqm|n:7935|pair:a/b|expert:gguf:smollm2|version:{cscore.__version__}"
    assert Signature.parse(text).fields == {"data": "mqm", "n": "7935", "pair": "a/b", "expert": "gguf:smollm2",
                                            "version": cscore.__version__}
    with pytest.raises(ValueError, match="not a cscore signature field"):
        Signature.parse("data:mqm|garbage")
