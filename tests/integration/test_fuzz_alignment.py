"""Scores travel with their inputs: whatever the order of the items, repeated prompts (prefix
sharing groups them), lengths (batches are sorted by length) or padding side, each item gets the
score it gets alone. A misaligned batch, group or sort would give some item another's score."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SENTENCES = ["The mayor opened a new bridge over the river on Monday.",
             "The council said the bridge cost five million.",
             "Researchers found that the new vaccine protects most patients.",
             "The team won the final match after a late goal."]
HYPS = ["A bridge was opened.", "The team won.", "The vaccine works on most patients.", "Bridge.",
        "The council spent five million on a bridge over the river in two years."]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair(tiny_dirs, one_torch_thread):
    from cscore.scorers.api import ModelPair

    return ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, device="cpu", dtype="float64")


@pytest.fixture(scope="module")
def alone(pair):
    """Each (prompt, hypothesis) scored on its own: the score it must keep in any batch."""
    out = {}
    for p in range(len(SENTENCES)):
        for h in range(len(HYPS)):
            stats = pair.statistics([SENTENCES[p] + "\nSummary:\n"], [HYPS[h]], temperatures=(0.5, 1.0, 1.5))
            out[p, h] = (stats.score("contrast", gamma=0.1)[0], stats.score("single", model="amateur")[0])
    return out


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, len(HYPS) - 1)), min_size=1, max_size=14),
       st.sampled_from([64, 128, 4096]), st.sampled_from(["left", "right"]), st.booleans())
def test_each_item_keeps_its_own_score(pair, alone, items, budget, side, share):
    prompts = [SENTENCES[p] + "\nSummary:\n" for p, _ in items]
    stats = pair.statistics(prompts, [HYPS[h] for _, h in items], temperatures=(0.5, 1.0, 1.5),
                            token_budget=budget, padding_side=side, prefix_sharing=share)
    contrast, amateur = stats.score("contrast", gamma=0.1), stats.score("single", model="amateur")
    want = np.array([alone[it] for it in items])
    np.testing.assert_allclose(contrast, want[:, 0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(amateur, want[:, 1], rtol=1e-9, atol=1e-9)
