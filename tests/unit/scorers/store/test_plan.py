"""The shard plan (scorers/store/checkpoint.py): which shard owns which unit, for batches, decode trees
and negative groups alike. The deal itself (greedy by cost, ties to the lowest index) is pinned in
test_shards.py; here the ``Shard`` value that every dealer asks."""

from __future__ import annotations

import numpy as np

from cscore.scorers.store.checkpoint import Checkpoint, Shard, deal

# costs 50, 30, 30, 20, 10 dealt to 2 (the loads before each): 50 -> 0 (0, 0: a tie, the lowest index);
# 30 -> 1 (50, 0); 30 -> 1 (50, 30); 20 -> 0 (50, 60); 10 -> 1 (70, 60)
COSTS = [50, 30, 30, 20, 10]
UNITS = [[0, 1], [2], [3, 4], [5], [6, 7]]  # item indices of each unit


def test_owners_by_hand_ties_to_the_lowest_index():
    assert Shard(0, 2).owners(COSTS) == [0, 1, 1, 0, 1]
    assert Shard(1, 2).owners(COSTS) == deal(COSTS, 2)  # every shard deals alike
    assert Shard(0, 3).owners([10, 10, 10, 10]) == [0, 1, 2, 0]  # all tied: in index order, then the lightest
    assert Shard(0, 1).owners(COSTS) == [0] * 5


def test_mine_and_foreign_split_the_units_between_the_shards():
    assert Shard(0, 2).mine(UNITS, COSTS) == [[0, 1], [5]]
    assert Shard(1, 2).mine(UNITS, COSTS) == [[2], [3, 4], [6, 7]]
    assert Shard(0, 2).foreign(UNITS, COSTS, 9).tolist() == [False, False, True, True, True, False, True, True,
                                                               False]  # item 8 is in no unit: nobody's foreign
    assert not Shard(0, 1).foreign(UNITS, COSTS, 9).any()
    assert Shard(0, 1).mine(UNITS, COSTS) == UNITS


def test_a_checkpoint_carries_its_shard_and_keeps_the_foreign_items_it_is_told(tmp_path):
    ck = Checkpoint(tmp_path, "k", ["h"], np.arange(10), [1.0], shard=(1, 2))
    assert ck.part == Shard(1, 2) and ck.part.index == 1 and ck.part.count == 2
    assert not ck.foreign.any()
    ck.mark_foreign(ck.part.foreign(UNITS, COSTS, ck.n_items))
    assert np.flatnonzero(ck.foreign).tolist() == [0, 1, 5]
    assert Checkpoint(tmp_path, "k", ["h"], np.arange(10), [1.0]).part is None


def test_the_engine_asks_the_checkpoint_for_its_part_of_the_plan(tmp_path):
    """The engine's ``deal`` knows no shards: it asks the checkpoint's ``part`` (a ``PlanPart``) for
    the items others run and the progress's detail; a shard's checkpoint answers with its shard."""
    from cscore.scorers.engine.passes import deal

    told: dict = {}
    progress = lambda n: None  # noqa: E731
    progress.work = lambda **counts: told.update(counts)  # type: ignore[attr-defined]
    ck = Checkpoint(tmp_path, "k", ["h"], np.arange(9), [1.0], shard=(1, 2))
    assert ck.part == Shard(1, 2)
    foreign = deal(ck, UNITS, COSTS, progress, tokens=[5, 3, 3, 2, 1], detail="the plan")
    assert np.flatnonzero(foreign).tolist() == [0, 1, 5] and np.flatnonzero(ck.foreign).tolist() == [0, 1, 5]
    assert told == {"tokens": 7, "items": 5, "detail": "shard 1 of 2: 3 of 5 batches"}
    whole = Checkpoint(tmp_path / "whole", "k", ["h"], np.arange(9), [1.0])
    told.clear()
    assert whole.part is None and deal(whole, UNITS, COSTS, progress, tokens=[5, 3, 3, 2, 1], detail="x") is None
    assert told == {"tokens": 14, "detail": "x"}
