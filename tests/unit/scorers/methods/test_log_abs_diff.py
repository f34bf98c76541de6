"""ContrastScore's log|e^a - e^b| in log space (scorers/methods/contrast.py) where the direct
formula fails: probabilities below float64's smallest (e^-800 underflows to 0) and two nearly
equal probabilities (e^a - e^b cancels). Expected values by hand: log|e^a - e^b| =
max(a, b) + log(1 - e^-|a - b|)."""

import math

import numpy as np

from cscore.scorers.methods.contrast import log_abs_diff


def test_tiny_probabilities_keep_their_log_difference():
    # e^-800 and e^-801 are both 0.0 in float64; the difference is e^-800 (1 - e^-1)
    got = log_abs_diff(np.array([-800.0, -801.0]), np.array([-801.0, -800.0]))
    want = -800.0 + math.log(1 - math.exp(-1))  # -800.45867514538708
    assert np.allclose(got, [want, want], rtol=0, atol=1e-12)


def test_nearly_equal_probabilities_do_not_cancel():
    # a - b = g = 2^-40 exactly: log(1 - e^-g) = log(g) - g/2 + O(g^2) = -40 ln 2 - 4.5e-13;
    # e^a - e^b directly keeps only ~4 of its digits (relative error ~1e-4)
    a, b = -0.5, -0.5 - 2.0 ** -40
    got = float(log_abs_diff(np.array([a]), np.array([b]))[0])
    assert abs(got - (-0.5 - 40 * math.log(2) - 2.0 ** -41)) < 1e-12


def test_equal_terms_are_minus_infinity_and_both_zero_too():
    got = log_abs_diff(np.array([-2.0, -np.inf]), np.array([-2.0, -np.inf]))
    assert np.isneginf(got).all()
