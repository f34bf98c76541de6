"""Random prompts and hypotheses over a small vocabulary, for the tests of the forward pass's
batches, checkpoints and shards."""

from __future__ import annotations

import numpy as np

WORDS = "the mayor opened a new bridge over river council said it cost five million team won final match".split()


def prompts_and_hyps(n: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` prompts (every third one the same: packed rows under prefix sharing) and ``n`` hypotheses."""
    rng = np.random.default_rng(seed)
    prompts = ["Summarize: the council met." if i % 3 == 0 else
               "Summarize: " + " ".join(rng.choice(WORDS, size=int(rng.integers(4, 20)))) for i in range(n)]
    hyps = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 9)))) for _ in range(n)]
    return prompts, hyps
