"""What every statistics pass shares: input checks, progress, checkpointed batches skipped, and the outputs
collected on the device."""

from __future__ import annotations

import functools
import time
from contextlib import contextmanager
from typing import Protocol, Sequence

import numpy as np
import torch

from cscore.errors import ConfigError
from cscore.scorers.engine.report import EngineReport  # noqa: F401 (re-exported: its home is report.py)
from cscore.scorers.engine.stats import ROW_NAMES, TokenStats
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.models.anatomy import decoder_base, layer_list


def check_inputs(items, temperatures: Sequence[float],
                 padding_side: str) -> tuple[tuple[float, ...], np.ndarray, np.ndarray]:
    """The checks every engine pass makes; returns the temperatures as floats, each item's offset into the
    scored tokens (int64 [n_items + 1]) and those tokens, the hypotheses end to end."""
    if padding_side not in ("left", "right"):
        raise ConfigError(f"padding_side must be left or right, got {padding_side!r}")
    temperatures = tuple(float(t) for t in temperatures)
    if not temperatures or min(temperatures) <= 0:
        raise ConfigError(f"temperatures must be positive, got {temperatures}")
    for i, (p, h) in enumerate(items):
        if not p or not h:
            raise InputError(f"item {i}: need at least one prompt token and one hypothesis token")
    offsets = np.concatenate([[0], np.cumsum([len(h) for _, h in items], dtype=np.int64)])
    token_ids = np.concatenate([np.asarray(h, dtype=np.int64) for _, h in items]) if items else np.zeros(0, np.int64)
    return temperatures, offsets, token_ids


def announce(progress, *, tokens: int | None = None, steps: int | None = None, items: int | None = None,
             kept: int | None = None, detail: str | None = None) -> None:
    """Tell a progress callback's ``work`` (where it has one) what the pass will do."""
    work = getattr(progress, "work", None)
    if work is not None:
        counts = {"tokens": tokens, "steps": steps, "items": items, "kept": kept, "detail": detail}
        work(**{k: v for k, v in counts.items() if v is not None})


def share(progress, fraction: float) -> None:
    """Tell a progress callback's ``part`` (where it has one) the share of the planned work done."""
    part = getattr(progress, "part", None)
    if part is not None:
        part(fraction)


class Ticks:
    """The share of a pass's planned work done, batch by batch and layer by layer."""

    def __init__(self, progress, costs: Sequence[float]):
        self.progress = progress if getattr(progress, "part", None) is not None else None
        self.total, self.done, self.running = float(sum(costs)), 0.0, 0.0

    def skip(self, cost: float) -> None:
        self.total -= cost

    def begin(self, cost: float) -> None:
        self.running = float(cost)

    def step(self, k: float, of: float) -> None:
        if self.progress is not None and self.total > 0:
            share(self.progress, (self.done + self.running * min(k / of, 0.99)) / self.total)

    def end(self) -> None:
        self.done, self.running = self.done + self.running, 0.0
        self.step(0, 1)


@contextmanager
def layer_ticks(layers, ticks: Ticks):
    """``ticks.step(i, n)`` as each of the ``n`` decoder ``layers`` ends its forward."""
    n = len(layers)
    handles = [layer.register_forward_hook(lambda *_, i=i: ticks.step(i + 1, n)) for i, layer in enumerate(layers)
               ] if ticks.progress is not None else []
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def decode_ticks(models, clock, progress, now=time.perf_counter):
    """One unit of a decode on ``clock`` (a ``DecodeClock``, or None), told each forward of ``models``'
    decoders in a full model's terms; the share done goes to ``progress``."""
    if clock is None:
        yield
        return
    owner: dict[int, tuple[torch.nn.Module, int]] = {}  # a layer: (it, its full model's layers)
    for m in models:
        for x in layer_list(m):
            owner.setdefault(id(x), (x, len(layer_list(m))))

    def layer(_module, args, kwargs, _out, n=1):
        rows, positions = (args[0] if args else kwargs["hidden_states"]).shape[:2]
        if positions > 1:
            told("prefill", rows * positions / n)

    def base_end(module, _args, kwargs, out):
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        if hidden.shape[1] == 1:
            own = list(getattr(module, "layers", ()) or ())
            told("step", len(own) / owner[id(own[0])][1] if own and id(own[0]) in owner else 1.0)

    def told(kind: str, tokens: float) -> None:
        at = now()
        if kind == "end":
            clock.end(at)
        else:
            clock.event(kind, tokens, at)
        fraction = clock.done_share(at)
        if fraction is not None and 0 < fraction < 1:
            share(progress, fraction)

    # an early exit's cut decoder is a shallow copy sharing its hook dicts: one registration serves both
    bases = {id(getattr(decoder_base(m), "_forward_hooks", m)): decoder_base(m) for m in models}
    handles = [b.register_forward_hook(base_end, with_kwargs=True) for b in bases.values()]
    handles += [x.register_forward_hook(functools.partial(layer, n=n), with_kwargs=True) for x, n in owner.values()]
    clock.begin(now())
    try:
        yield
    finally:
        for h in handles:
            h.remove()
    told("end", 0)


def per_item(factory, group: int):
    """A progress factory counting items of ``group`` rows each (a judge's values per item)."""
    if factory is None or group == 1:
        return factory

    def opened(name: str, rows: int):
        inner = factory(name, rows // group)
        if inner is None:
            return None
        carry = 0

        def advance(n: int) -> None:
            nonlocal carry
            whole, carry = divmod(carry + n, group)
            if whole:
                inner(whole)

        def work(**counts) -> None:  # rows told as items
            announce(inner, **{k: v // group if k in ("items", "kept") and v is not None else v
                               for k, v in counts.items()})

        advance.work = work  # type: ignore[attr-defined]
        advance.part = lambda fraction: share(inner, fraction)  # type: ignore[attr-defined]
        return advance

    return opened


class PlanPart(Protocol):
    """The part of a pass's planned batches this process runs (a checkpoint's ``part``; None: all)."""

    def foreign(self, units: Sequence[Sequence[int]], costs: Sequence[int], n_items: int) -> np.ndarray:
        """The items of the planned batches (``units``, padded tokens ``costs``) other processes run."""
        ...

    def detail(self, mine: int, planned: int) -> str:
        """The progress's detail: this process runs ``mine`` of the ``planned`` batches."""
        ...


def deal(checkpoint, batches: list[list[int]], costs: list[int], progress, *, tokens: Sequence[int],
         detail: str) -> np.ndarray | None:
    """Announce a pass's plan, less the batches a checkpoint kept or (``PlanPart``) other processes run;
    returns the items others run, or None."""
    part: PlanPart | None = None if checkpoint is None else checkpoint.part
    if checkpoint is None:
        announce(progress, tokens=int(sum(tokens)), detail=detail)
        return None
    foreign = None
    if part is not None:
        foreign = part.foreign(batches, costs, checkpoint.n_items)
        checkpoint.mark_foreign(foreign)
        detail = part.detail(sum(not checkpoint.foreign[b].all() for b in batches), len(batches))
    runs = [i for i, b in enumerate(batches) if not checkpoint.foreign[b].all() and not checkpoint.done[b].all()]
    items = sum(len(batches[i]) for i in runs)
    held = int(checkpoint.n_items - checkpoint.foreign.sum()) - items
    announce(progress, tokens=int(sum(tokens[i] for i in runs)), items=items if part is not None or held else None,
             kept=held or None, detail=detail)
    return foreign


def run_batches(batches, members, costs: Sequence[float], checkpoint, progress, done: np.ndarray | None = None):
    """Each batch a checkpoint holds not and no other process runs, with the pass's ``Ticks`` begun on it; once
    the caller is through with it the ticks end and ``progress`` counts its ``members``. The items of a batch
    skipped are marked ``done``."""
    ticks = Ticks(progress, costs)
    for batch, own, cost in zip(batches, members, costs):
        if checkpoint is not None and (checkpoint.foreign[own].all() or checkpoint.done[own].all()):
            if done is not None:
                done[own] = True
            ticks.skip(cost)
            continue
        ticks.begin(cost)
        yield batch, ticks
        ticks.end()
        if progress is not None:
            progress(len(own))


class Outputs:
    """Per-token statistics collected on the device (rows in ``stats.ROW_NAMES`` order), copied once at the end."""

    def __init__(self, temperatures, offsets, token_ids, heads, checkpoint=None, rows: dict | None = None):
        """``temperatures``, ``offsets``, ``token_ids``: as ``check_inputs`` returns them."""
        self.checkpoint = checkpoint  # gets each batch's rows too, and fills in the rows it kept
        self.temperatures, self.offsets, self.token_ids, self.heads = temperatures, offsets, token_ids, list(heads)
        self.names = {h: (rows or {}).get(h, ROW_NAMES[:2]) for h in heads}  # each head's rows, named
        self.parts: dict[str, list] = {h: [] for h in heads}
        self.dest: list[torch.Tensor] = []

    def add(self, members, per_head: dict[str, tuple[torch.Tensor, ...]]) -> None:
        """A batch's rows per head: the tokens of its items ``members``, in that order."""
        dest = torch.from_numpy(np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in members]))
        self.dest.append(dest)
        for h, rows in per_head.items():
            self.parts[h].append(rows)
        if self.checkpoint is not None:
            self.checkpoint.add(dest, per_head)

    def fetch(self) -> dict[str, TokenStats]:
        """Each head's statistics (the one device-to-host copy)."""
        shape = (len(self.temperatures), int(self.offsets[-1]))
        full = {h: {name: np.empty(shape, dtype=np.float64) for name in self.names[h]} for h in self.heads}
        if self.checkpoint is not None:
            self.checkpoint.fill(full)
        if self.dest:
            dest = torch.cat(self.dest).cpu().numpy()
            for h in self.heads:  # later parts overwrite earlier ones (a retried batch)
                for k, name in enumerate(self.names[h]):
                    full[h][name][:, dest] = torch.cat([rows[k] for rows in self.parts[h]], dim=1).cpu().numpy()
        return {h: TokenStats(self.temperatures, self.offsets, self.token_ids, full[h].pop("logp"),
                              full[h].pop("logp_max"), full[h]) for h in self.heads}
