"""A transformers 2-class sequence classifier as a CDM discriminator: load, fine-tune (AdamW,
cross-entropy, on the train groups), read log-odds."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from cscore.errors import ConfigError

log = logging.getLogger(__name__)


def load_classifier(spec: str, device):
    """(tokenizer, AutoModelForSequenceClassification with 2 labels) from a directory or hub id."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from cscore.scorers.models.gguf import ModelSpecError
    from cscore.scorers.models.models import check_local_path, load_failure

    if spec.startswith("gguf:"):
        raise ConfigError(f"cdm.train.discriminator={spec}: a GGUF file cannot be trained as a classifier here; "
                          "give a transformers model directory or hub id (or pooler)")
    check_local_path(spec, spec)
    try:
        tok = AutoTokenizer.from_pretrained(spec)
        model = AutoModelForSequenceClassification.from_pretrained(
            spec, num_labels=2, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    except (OSError, ValueError) as err:
        raise ModelSpecError(load_failure(spec, spec, None, err)) from err
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    model.config.pad_token_id = tok.pad_token_id
    return tok, model.to(device)


def encode_texts(tok, prompts, texts, text: str, max_length: int):
    if text == "prompt_hypothesis":  # a text pair: the prompt is cut first when too long
        return tok(list(prompts), list(texts), padding=True, truncation="only_first", max_length=max_length,
                   return_tensors="pt")
    return tok(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")


def classifier_log_odds(tok, model, prompts, texts, *, text: str, batch_size: int, max_length: int):
    """logit(positive) − logit(negative) per item, in the given order."""
    import torch

    out = []
    model.eval()
    with torch.inference_mode():
        for s in range(0, len(texts), batch_size):
            enc = encode_texts(tok, prompts[s:s + batch_size], texts[s:s + batch_size], text, max_length)
            logits = model(**{k: v.to(model.device) for k, v in enc.items()}).logits.double()
            out.append((logits[:, 1] - logits[:, 0]).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def train_classifier(t: dict, items, labels, train_mask, out: Path, device: str):
    """Fine-tune on the train groups and save to ``out``; returns (its record, the log-odds of every item)."""
    import torch

    from cscore.scorers.models.models import auto_device

    torch.manual_seed(t["seed"])
    tok, model = load_classifier(t["discriminator"], auto_device(device))
    prompts = [i["prompt"] for i in items]
    texts = [i["text"] for i in items]
    train_idx = np.flatnonzero(train_mask)
    rng = np.random.default_rng(t["seed"])
    opt = torch.optim.AdamW(model.parameters(), lr=t["lr"])
    losses = []
    for epoch in range(t["epochs"]):
        model.train()
        total = 0.0
        order = rng.permutation(train_idx)  # a new batch order every epoch
        for s in range(0, len(order), t["batch_size"]):
            idx = order[s:s + t["batch_size"]]
            enc = encode_texts(tok, [prompts[i] for i in idx], [texts[i] for i in idx], t["text"], t["max_length"])
            y = torch.tensor(labels[idx], dtype=torch.long, device=model.device)
            loss = model(**{k: v.to(model.device) for k, v in enc.items()}, labels=y).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        losses.append(total / len(train_idx))
        log.info("  epoch %d/%d: mean training loss %.4f", epoch + 1, t["epochs"], losses[-1])
    log_odds = classifier_log_odds(tok, model, prompts, texts, text=t["text"], batch_size=t["batch_size"],
                                   max_length=t["max_length"])
    model.save_pretrained(out)
    tok.save_pretrained(out)
    record = {"classifier": {"base": t["discriminator"], "class": type(model).__name__, "text": t["text"],
                             "max_length": t["max_length"], "epochs": t["epochs"], "lr": t["lr"],
                             "batch_size": t["batch_size"], "train_loss": losses}}
    return record, log_odds
