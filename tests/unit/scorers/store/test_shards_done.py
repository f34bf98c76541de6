"""The line a sharded pass logs once every shard is done (issue 47, item 10): this command's
shards' time only; shards done before it named as kept, their time and the gap not counted."""

from cscore.scorers.store.runner import done_text

SINCE = 1000.0  # this command's start (time.time())


def mark(start: float, end: float, seconds: float) -> dict:
    return {"start": start, "end": end, "seconds": seconds}


def test_a_command_that_ran_every_shard_counts_from_the_first_start_to_the_last_end():
    marks = {0: mark(1001.0, 1010.0, 9.0), 1: mark(1002.0, 1012.5, 10.5)}
    assert done_text(marks, 2, SINCE) == "every shard done in 11.5s (9.0s, 10.5s per shard)"


def test_a_rerun_counts_only_the_shard_it_computed():
    # shard 0 done by the killed command long before; the re-run computed shard 1 in 20 s
    marks = {0: mark(500.0, 560.0, 60.0), 1: mark(1030.0, 1050.0, 20.0)}
    assert done_text(marks, 2, SINCE) == ("every shard done; this command's shard 1 of 2 in 20.0s (20.0s); "
                                          "shard 0 of 2 done before it, kept")
    assert done_text({0: marks[0]}, 2, SINCE) is None  # shard 1 not done yet: no line
    assert done_text({0: marks[0], 1: mark(600.0, 700.0, 100.0)}, 2, SINCE) == \
        "every shard done before this command (shards 0, 1 of 2, kept)"
