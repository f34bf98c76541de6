"""A trained CDM discriminator read back for scoring (``method=cdm_gen``), and the pair record a
pooler discriminator is checked against: shared by ``cscore cdm train`` and the discriminator kind."""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig

from cscore.errors import ConfigError


def pair_record(cfg: DictConfig) -> dict:
    p = cfg.pair
    return {"name": p.name, "expert": p.expert.path, "amateur": p.amateur.get("path"),
            "early_exit": p.amateur.get("early_exit"), "revision": p.expert.get("revision"),
            "amateur_revision": p.amateur.get("revision")}


def pooler_from_dict(d: dict):
    from cscore.scorers import cdm_pooler

    if list(d.get("features", [])) != list(cdm_pooler.FEATURES):
        raise ConfigError("the discriminator's pooler was trained on other momentum features than this cscore "
                          "version computes; train it again (cscore cdm train)")
    return cdm_pooler.Pooler(d["objective"], np.array([d["weights"][f] for f in cdm_pooler.FEATURES]),
                             float(d["bias"]), np.array(d["center"]), np.array(d["scale"]), d.get("labels", ""),
                             d.get("n_train", 0), d.get("n_positive"))


def load_classifier(spec: str, device):
    """(tokenizer, AutoModelForSequenceClassification with 2 labels) from a directory or hub id."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from cscore.scorers.gguf import ModelSpecError
    from cscore.scorers.models import check_local_path, load_failure

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


def encode_texts(tok, prompts, texts, text: str, max_length: int):
    if text == "prompt_hypothesis":  # a text pair: the prompt is cut first when too long
        return tok(list(prompts), list(texts), padding=True, truncation="only_first", max_length=max_length,
                   return_tensors="pt")
    return tok(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
