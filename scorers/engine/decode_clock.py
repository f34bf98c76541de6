"""The time a decode will take, from its plan (each unit's prefill tokens and most steps) and the forwards
measured so far; pure: no torch, no clock of its own (docs/concepts.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

WAIT = 10.0  # seconds without an ended unit after which the plan's most steps (x prior) are assumed


@dataclass(frozen=True)
class Unit:
    """A unit of the plan: its prefill tokens, its most steps, the rows one step feeds."""
    prefill: float
    steps: float
    rows: float = 1


class DecodeClock:
    def __init__(self, units: Sequence[Unit], start: float, prior: float | None = 1.0, wait: float = WAIT):
        self.units, self.start, self.prior, self.wait = list(units), start, prior, wait
        self.rest = [Unit(0.0, 0)]  # rest[i]: the units from i on as one (its rows: a mean step's)
        for u in reversed(self.units):
            r = self.rest[-1]
            steps = r.steps + u.steps
            rows = (r.rows * r.steps + u.rows * u.steps) / steps if steps else u.rows
            self.rest.append(Unit(r.prefill + u.prefill, steps, rows))
        self.rest.reverse()
        self.last = start
        self.prefill_s = self.prefill_tok = self.step_s = 0.0
        self.steps_n = 0.0  # steps measured, each its share of a full model's layers
        self.used = self.most = 0.0  # the steps the ended units took, and their most
        self.next = self.ended = 0  # the index of the next unit to begin; units ended
        self.running: Unit | None = None
        self.fed = 0.0  # prefill tokens of the running unit measured
        self.taken = 0.0  # steps of the running unit measured

    def begin(self, at: float) -> None:
        """The next unit of the plan starts (the time since the last event is its own)."""
        self.running, self.fed, self.taken, self.last = self.units[self.next], 0.0, 0.0, at
        self.next += 1

    def event(self, kind: str, tokens: float, at: float) -> None:
        """A ``prefill`` or ``step`` forward (``tokens``: its share of a full model's) ended at ``at``."""
        seconds, self.last = max(at - self.last, 0.0), at
        if kind == "prefill":
            self.prefill_s += seconds
            self.prefill_tok += tokens
            self.fed += tokens
        elif kind == "step":
            self.step_s += seconds
            self.steps_n += tokens
            self.taken += tokens
        else:
            raise ValueError(f"a decode event is prefill or step, not {kind!r}")

    def end(self, at: float) -> None:
        """The running unit ended (its time since the last event is its own)."""
        if self.running is not None and self.running.steps > 0:
            self.used += self.taken
            self.most += self.running.steps
        self.ended += 1
        self.running, self.last = None, at

    def share(self) -> float:
        """The share of its most steps a unit takes: the ended units', else ``prior``, else a guess."""
        if self.most:
            return self.used / self.most
        if self.prior is not None:
            return self.prior
        most = self.running.steps if self.running is not None else 0
        return min(max(2 * self.taken, 1) / most, 1.0) if most else 1.0

    def unit_left(self, u: Unit, fed: float, taken: float) -> float:
        """The seconds unit ``u`` has left after ``fed`` prefill tokens and ``taken`` steps (a prefill measured)."""
        token = self.prefill_s / self.prefill_tok
        step = self.step_s / self.steps_n if self.steps_n else token * u.rows  # a step unmeasured: its rows' tokens
        steps = min(max(self.share() * u.steps, taken + (taken < u.steps)), u.steps)
        return max(u.prefill - fed, 0.0) * token + max(steps - taken, 0) * step

    def left(self, at: float) -> float | None:
        """The seconds the decode has left at ``at``; None until costs are measured and a unit ended (or ``wait``)."""
        if (not self.ended and at - self.start < self.wait) or self.prefill_tok <= 0:  # no token cost yet
            return None
        left = self.unit_left(self.rest[self.next], 0.0, 0)
        if self.running is not None:
            left += self.unit_left(self.running, self.fed, self.taken)
        return max(left - (at - self.last), 0.0)

    def done_share(self, at: float) -> float | None:
        """The share of the decode's time run at ``at`` (elapsed over elapsed + left), or None."""
        left = self.left(at)
        if left is None:
            return None
        ran = at - self.start
        return ran / (ran + left) if ran + left > 0 else 1.0
