"""Cross-family pairs beyond aligned units (tests/test_align.py): the reverse pair reads the
statistics cache of the forward one, and CD-judge over the range's score values
(``method.decode=values``, ``scorers/judge_values.py``)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPTS = ["Summarise: The mayor opened a new bridge.\nSummary:", "Summarise: The team won the final.\nSummary:"]
HYPS = ["A bridge was opened.", "The team won the match in extra time."]


def forward_counter(pair):
    """A list that gets one entry per forward call of any model of ``pair`` (a hook on its input
    embedding, which every forward pass goes through)."""
    calls: list[str] = []
    for role, m in pair.models.items():
        m.model.get_input_embeddings().register_forward_hook(lambda *_, role=role: calls.append(role))
    return calls


def test_reverse_pair_reads_the_forward_pairs_statistics(tiny_dirs, tmp_path):
    """A,B then B,A: the second pair runs no forward pass and gets, per model, the same statistics
    (A's as amateur are A's as expert); a model alone reads its own pass too."""
    from cscore import ModelPair
    from cscore.scorers.cache import StatsCache

    cache = StatsCache(tmp_path / "cache", checkpoint_seconds=None)
    forward = ModelPair.load(tiny_dirs.expert, tiny_dirs.other)
    assert forward.aligned
    calls = forward_counter(forward)
    first = forward.statistics(PROMPTS, HYPS, cache=cache, temperatures=[1.0, 1.5])
    assert set(calls) == {"expert", "amateur"} and not any(r.cached for r in first.reports.values())

    reverse = ModelPair.load(tiny_dirs.other, tiny_dirs.expert)
    calls = forward_counter(reverse)
    inputs = reverse.encode(PROMPTS, HYPS)
    second = reverse.statistics(inputs=inputs, cache=cache, temperatures=[1.0, 1.5])
    assert calls == [] and all(r.cached for r in second.reports.values())
    for role, other in (("expert", "amateur"), ("amateur", "expert")):
        np.testing.assert_array_equal(second.stats[role].logp, first.stats[other].logp)
        np.testing.assert_array_equal(second.stats[role].token_ids, first.stats[other].token_ids)
    # the contrast of the reverse pair is that of the swapped statistics (no model involved)
    assert second.score("ensemble", gamma=0.5).tolist() == pytest.approx(first.score("ensemble", gamma=0.5).tolist(),
                                                                        rel=1e-12)
    alone = ModelPair.load(tiny_dirs.other)  # B by itself: the key of B's own pass
    calls = forward_counter(alone)
    got = alone.statistics(PROMPTS, HYPS, cache=cache, temperatures=[1.0, 1.5])
    assert calls == [] and got.reports["expert"].cached
