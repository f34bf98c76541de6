"""The decode clock (scorers/engine/decode_clock.py): hand-computed estimates from a plan and a few
events, and real decodes' step timings (clock_runs/*.json, written by
scripts/decode_clock_runs.py) replayed through it: an estimate within the first 15 s, and every
estimate after 15 s within a factor of 2 of the recorded truth."""

import json
from pathlib import Path

import pytest

from cscore.scorers.engine.decode_clock import WAIT, DecodeClock, Unit

RUNS = sorted((Path(__file__).parent / "clock_runs").glob("*.json"))
EARLY = 15.0  # seconds within which a decode has its first estimate


def test_estimate_from_the_first_unit():
    """3 units of 100 prefill tokens and at most 10 steps: the first's prefill takes 2 s (0.02 s a
    token), its 2 steps 0.5 s each and it ends: 2 units of 100 x 0.02 + 2 x 0.5 = 3 s are left."""
    clock = DecodeClock([Unit(100, 10)] * 3, start=0.0)
    clock.begin(0.0)
    assert clock.left(0.0) is None
    clock.event("prefill", 60, 1.2)
    clock.event("prefill", 40, 2.0)
    clock.event("step", 1, 2.5)
    assert clock.left(2.5) is None  # no unit ended, WAIT not reached
    clock.event("step", 1, 3.0)
    clock.end(3.0)
    assert clock.share() == pytest.approx(0.2)
    assert clock.left(3.0) == pytest.approx(6.0)
    assert clock.left(4.0) == pytest.approx(5.0)  # the second's first second (no event yet)
    assert clock.done_share(4.0) == pytest.approx(4 / 9)
    clock.begin(4.0)
    clock.event("prefill", 100, 5.0)  # now 0.015 s a token; the running unit: its 2 steps left
    assert clock.left(5.0) == pytest.approx(2 * 0.5 + 100 * 0.015 + 2 * 0.5)
    for at in (5.5, 6.0, 6.5):
        clock.event("step", 1, at)  # past the share: at least one more step
    assert clock.left(6.5) == pytest.approx(0.5 + 100 * 0.015 + 2 * 0.5)


def test_before_any_unit_ends_the_most_steps_after_wait():
    """One unit of 1000 prefill tokens, at most 20 steps of 4 rows: before WAIT no estimate; after
    it, the prefill's share measured gives a token's cost (half the tokens in 5 s: 0.01 s), a step
    before the first is measured costs its 4 rows' tokens (0.04 s), and the unit takes all its
    steps; a measured step's cost replaces that."""
    clock = DecodeClock([Unit(1000, 20, rows=4)], start=0.0)
    clock.begin(0.0)
    clock.event("prefill", 500, 5.0)
    assert clock.left(5.0) is None
    assert clock.left(WAIT) == pytest.approx(500 * 0.01 + 20 * 0.04 - (WAIT - 5.0))
    clock.event("prefill", 500, 10.0)
    clock.event("step", 1, 11.0)
    assert clock.left(11.0) == pytest.approx(19 * 1.0)
    with pytest.raises(ValueError):
        clock.event("layer", 1, 12.0)


def replay(decode: dict, grid: float = 1.0) -> list[tuple[float, float | None]]:
    """(time, seconds left estimated then) at each recorded event and every ``grid`` seconds between."""
    clock = DecodeClock([Unit(*u) for u in decode["units"]], start=0.0, prior=decode["prior"])
    out: list[tuple[float, float | None]] = []
    last = 0.0
    for kind, tokens, at in decode["events"]:
        t = last + grid
        while t < at:
            out.append((t, clock.left(t)))
            t += grid
        if kind == "begin":
            clock.begin(at)
        elif kind == "end":
            clock.end(at)
        else:
            clock.event(kind, tokens, at)
        out.append((at, clock.left(at)))
        last = at
    return out


def decodes() -> list:
    return [pytest.param(decode, id=f"{path.stem}-{k}") for path in RUNS
            for k, decode in enumerate(json.loads(path.read_text())["decodes"])]


def test_recordings_are_there_and_small():
    assert len(RUNS) >= 3
    assert all(p.stat().st_size < 20_000 for p in RUNS)
    kinds = {json.loads(p.read_text())["command"].split("method=")[1].split()[0] for p in RUNS}
    assert kinds == {"cd_judge", "cd_judge_released"}


@pytest.mark.parametrize("decode", decodes())
def test_recorded_decode_estimates(decode):
    """The first estimate comes within EARLY seconds (or before the decode ends); from EARLY on (and
    from the first estimate of a shorter decode) every estimate of the whole decode's time (the
    time run + the time left) is within a factor of 2 of the recorded total, and the time left
    within a factor of 2 of the truth while more than 5 s remain."""
    total = decode["total"]
    got = replay(decode)
    first = next(t for t, left in got if left is not None)
    assert first <= min(EARLY, total)
    since = max(first, EARLY if total > EARLY else 0.0)
    for t, left in got:
        if t < since:
            continue
        assert left is not None, t
        assert total / 2 <= t + left <= 2 * total, (t, left, total)
        if total - t > 5:
            assert (total - t) / 2 <= left <= 2 * (total - t), (t, left, total)
