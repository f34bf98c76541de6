"""T5Score's discriminative training (Sec. 3.3): over ranking pairs (ŷ+, ŷ−, m+, m−) of a group with
m+ > m−, the loss (Eq. 3) L = max(0, f(ŷ−) − f(ŷ+) + α (m+ − m−)), f the mean log-probability of the
hypothesis given the reference or source (pairs also swapped, as the paper augments). The recipe and
where it differs from the released script: docs/methods/baselines.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from cscore.errors import ConfigError
from cscore.training.params import OPTIMIZERS, SCHEDULES


@dataclass(frozen=True)
class RankPair:
    group: str
    context: str  # the reference or the source
    better: str
    worse: str
    margin: float  # m+ - m- > 0
    reverse: bool = False  # True: f scores the context given the hypothesis


def ranking_pairs(groups, contexts, hypotheses, scores, *, both_directions: bool = True,
                  min_gap: float = 0.0) -> list[RankPair]:
    """D_RR: every two hypotheses of a group whose human scores differ by more than ``min_gap``
    (rows with a missing score or an empty context are not used)."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        if np.isfinite(scores[i]) and isinstance(contexts[i], str) and contexts[i].strip():
            by_group.setdefault(str(g), []).append(i)
    out = []
    for g, rows in by_group.items():
        for a, b in combinations(rows, 2):
            if abs(scores[a] - scores[b]) <= min_gap:
                continue
            hi, lo = (a, b) if scores[a] > scores[b] else (b, a)
            for rev in ((False, True) if both_directions else (False,)):
                out.append(RankPair(g, contexts[hi], hypotheses[hi], hypotheses[lo], float(scores[hi] - scores[lo]),
                                    rev))
    return out


def mean_logp(model, tokenizer, sources: list[str], targets: list[str], *, max_length: int) -> torch.Tensor:
    """(1/|b|) log p(b | a) per (a, b), differentiable; sources and targets cut to ``max_length`` tokens."""
    from cscore.scorers.engine.seq2seq import decoder_start
    from cscore.scorers.engine.tokenize import target_ids

    eos = tokenizer.eos_token_id
    start = decoder_start(model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    enc = [list(tokenizer(a, add_special_tokens=True)["input_ids"])[:max_length] for a in sources]
    tgt = [target_ids(tokenizer, b, eos)[:max_length] for b in targets]

    def padded(rows, value, dtype=torch.long):
        out = pad_sequence([torch.tensor(r, dtype=dtype) for r in rows], batch_first=True, padding_value=value)
        return out.to(device)

    enc_ids, enc_mask = padded(enc, pad), padded([[1] * len(e) for e in enc], 0)
    dec_in, labels = padded([[start] + t[:-1] for t in tgt], pad), padded(tgt, pad)
    tmask = padded([[1.0] * len(t) for t in tgt], 0.0, torch.float32)
    logits = model(input_ids=enc_ids, attention_mask=enc_mask, decoder_input_ids=dec_in,
                   decoder_attention_mask=(tmask > 0).long()).logits
    lp = torch.log_softmax(logits.float() if logits.dtype != torch.float64 else logits, dim=-1)
    lp = lp.gather(-1, labels[..., None])[..., 0] * tmask.to(lp.dtype)
    return lp.sum(dim=1) / tmask.sum(dim=1).to(lp.dtype)


def pair_scores(model, tokenizer, pairs: list[RankPair], *, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(f(ŷ+), f(ŷ−)) for each pair, in its own direction."""
    def side(hyps):
        src = [h if p.reverse else p.context for p, h in zip(pairs, hyps)]
        tgt = [p.context if p.reverse else h for p, h in zip(pairs, hyps)]
        return mean_logp(model, tokenizer, src, tgt, max_length=max_length)

    return side([p.better for p in pairs]), side([p.worse for p in pairs])


def ranking_loss(f_better: torch.Tensor, f_worse: torch.Tensor, margins: torch.Tensor, alpha: float) -> torch.Tensor:
    """Eq. 3 per pair: max(0, f(ŷ−) − f(ŷ+) + α (m+ − m−))."""
    return torch.clamp(f_worse - f_better + alpha * margins, min=0.0)


@torch.no_grad()
def pairwise_accuracy(model, tokenizer, pairs: list[RankPair], *, batch_size: int, max_length: int) -> float | None:
    """Share of pairs with f(ŷ+) > f(ŷ−)."""
    if not pairs:
        return None
    was = model.training
    model.eval()
    right = 0
    for s in range(0, len(pairs), batch_size):
        fb, fw = pair_scores(model, tokenizer, pairs[s:s + batch_size], max_length=max_length)
        right += int((fb > fw).sum())
    model.train(was)
    return right / len(pairs)


def make_optimizer(model, name: str, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """Adafactor (the paper's) or AdamW; weight decay on the weight matrices only, as the Trainer does."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decays = {n for n, p in named if p.ndim >= 2 and "bias" not in n}
    groups = [{"params": [p for n, p in named if n in decays], "weight_decay": weight_decay},
              {"params": [p for n, p in named if n not in decays], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr)
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name}")


def total_steps(n_pairs: int, batch_size: int, epochs: int) -> int:
    """Optimizer steps of a run: one per batch (the last one may be short), every epoch."""
    return epochs * math.ceil(n_pairs / batch_size)


def make_schedule(optimizer: torch.optim.Optimizer, name: str, steps: int):
    """The lr schedule: ``linear`` (to 0, no warm-up, as the released script's Trainer) or ``constant``."""
    from transformers import get_constant_schedule, get_linear_schedule_with_warmup

    if name == "linear":
        return get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=steps)
    if name == "constant":
        return get_constant_schedule(optimizer)
    raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {name}")


def describe_optimizer(opt: torch.optim.Optimizer) -> dict:
    """The optimizer's class and the settings of its first parameter group (what it really uses)."""
    keys = ("lr", "weight_decay", "betas", "eps", "scale_parameter", "relative_step", "warmup_init", "clip_threshold")
    group = opt.param_groups[0]
    return {"class": type(opt).__name__, **{k: group[k] for k in keys if k in group}}


def dropout_override(config, p: float | None) -> dict:
    """The from_pretrained keyword that sets the model's dropout to ``p`` ({} for None: its own)."""
    if p is None:
        return {}
    for key in ("dropout_rate", "dropout"):  # T5 / mT5, BART-style
        if hasattr(config, key):
            return {key: p}
    raise ConfigError(f"t5score.train.dropout={p}: {type(config).__name__} has no dropout_rate or dropout setting; "
                      "give t5score.train.dropout=null")


@dataclass(frozen=True)
class Fit:
    """How ``train`` fits: the loss's ``alpha``, ``epochs`` of batches, texts cut to ``max_length`` tokens."""
    alpha: float
    epochs: int
    batch_size: int
    max_length: int
    seed: int


def train(model, tokenizer, pairs: list[RankPair], how: Fit, *, optimizer: torch.optim.Optimizer, log=None,
          schedule=None) -> list[float]:
    """``optimizer`` (and ``schedule``) over shuffled batches of pairs; returns the mean loss per epoch."""
    torch.manual_seed(how.seed)
    rng = np.random.default_rng(how.seed)
    model.train()
    losses = []
    for epoch in range(how.epochs):
        total = 0.0
        order = rng.permutation(len(pairs))  # a new batch order every epoch
        for s in range(0, len(order), how.batch_size):
            batch = [pairs[i] for i in order[s:s + how.batch_size]]
            fb, fw = pair_scores(model, tokenizer, batch, max_length=how.max_length)
            margins = torch.tensor([p.margin for p in batch], dtype=fb.dtype, device=fb.device)
            loss = ranking_loss(fb, fw, margins, how.alpha).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if schedule is not None:
                schedule.step()
            total += float(loss.detach()) * len(batch)
        losses.append(total / max(len(pairs), 1))
        if log is not None:
            log(f"  epoch {epoch + 1}/{how.epochs}: mean ranking loss {losses[-1]:.4f}")
        if not math.isfinite(losses[-1]):
            raise FloatingPointError(f"the ranking loss is {losses[-1]} after epoch {epoch + 1}; "
                                     "lower the learning rate")
    model.eval()
    return losses
