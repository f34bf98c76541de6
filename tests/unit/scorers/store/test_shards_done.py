"""The line a sharded pass logs once every shard is done (issue 47, item 10): this command's
shards' time only; shards done before it named as kept, their time and the gap not counted."""

import re

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


def test_a_worker_shard_done_before_the_parents_pass_began_is_this_commands(tmp_path, caplog):
    """A worker of runtime.devices may finish its shard of a later pass while the parent still merges
    the one before: the shard is this command's (marked after the command's start, the coordinator's
    ``since``), not "done before it, kept", and its items are not "done before this command"."""
    import logging
    import time

    from cscore.scorers.store.checkpoint import Place
    from cscore.scorers.store.runner import Done, Work, merged_report, run, this_command
    from cscore.tests.support.coordinator import ScriptedParent

    place = Place.of_cache(tmp_path, "key", 2)
    parent = ScriptedParent(2, 0, since=time.time())
    figures = {"tokens": 30, "padded_tokens": 32, "batches": 2, "items": 5}
    worker = {"start": parent.since + 0.01, "end": parent.since + 0.02, "seconds": 0.01}
    place.mark(1, {**worker, **figures})
    time.sleep(0.05)  # the parent's pass begins after it

    def merge():
        return Done({}, this_command(merged_report(place.marks(), 2, 0.0), place.marks(), parent.since))

    work = Work("statistics (amateur)", place, lambda: None, lambda: False, lambda k: figures, merge)
    with caplog.at_level(logging.INFO, logger="cscore.scorers.store.runner"):
        got = run(work, parent)
    said = caplog.text
    assert "kept" not in said and "done already" not in said, said
    assert re.search(r"statistics \(amateur\): every shard done in [\d.]+s \([\d.]+s, [\d.]+s per shard\)", said), said
    assert got.report.kept_shards == [] and got.report.resumed == 0 and got.report.tokens == 60
