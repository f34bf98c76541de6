"""Loading causal LMs and encoder-decoder models from a hub id, a local directory or a ``gguf:`` spec;
early-exit amateurs; the process's model pool."""

from __future__ import annotations

import copy
import logging
import os
import time

import torch
from torch import nn

from cscore.errors import ConfigError
from cscore.scorers.models import hub, specs
from cscore.scorers.models.anatomy import decoder_base, decoder_layers
from cscore.scorers.models.gguf import one_line, resolve_path
from cscore.scorers.models.identity import weight_files
from cscore.scorers.models.loaded import LoadedModel
from cscore.scorers.models.specs import SPEC_FORMS, ModelSpecError, check_local_path, kind  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)


def auto_device(device: str = "auto") -> torch.device:
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def auto_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in specs.DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; use auto or one of {sorted(specs.DTYPES)}")
    return getattr(torch, specs.DTYPES[dtype])


def model_class(config, seq2seq: bool) -> str | None:
    """The class name ``from_pretrained`` will build for ``config`` (None if transformers does not map it)."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    try:
        cls = auto._model_mapping[type(config)]
        return cls.__name__ if isinstance(cls, type) else None
    except (KeyError, AttributeError):
        return None


def load_model(spec: str, *, device: str = "auto", dtype: str = "auto", revision: str | None = None,
               trust_remote_code: bool = False, lazy: bool = False) -> LoadedModel:
    """Load tokenizer + model (causal, or seq2seq when its config ``is_encoder_decoder``), else raise
    ``ModelSpecError``; ``lazy``: the weights on first use of ``.model``."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    start = time.perf_counter()
    path, fingerprint = resolve_path(spec)
    check_local_path(spec, path)
    if kind(spec) == "hub" and (why := hub.usable_offline(spec, revision)):  # fail now: transformers would retry
        raise ModelSpecError(not_cached(spec, why))
    dev = auto_device(device)
    torch_dtype = auto_dtype(dtype, dev)
    try:  # revision=None is transformers' own default (the main branch)
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, revision=revision)
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, revision=revision)
    except (OSError, ValueError) as err:  # ValueError: e.g. a config.json transformers does not know
        raise ModelSpecError(load_failure(spec, path, revision, err)) from err
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM

    def weights() -> nn.Module:
        try:
            model: nn.Module = auto.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code,
                                                    revision=revision)
        except (OSError, ValueError) as err:
            raise ModelSpecError(load_failure(spec, path, revision, err)) from err
        return model.to(dev).eval().requires_grad_(False)

    info = {"spec": spec, "path": path, "revision": revision, "fingerprint": fingerprint,
            "class": model_class(config, seq2seq), "layers": getattr(config, "num_hidden_layers", None),
            "commit": getattr(config, "_commit_hash", None)}
    if seq2seq:
        info["encoder_decoder"] = True
    lm = LoadedModel(None, tok, spec, dev, torch_dtype, info, config=config, loader=weights)
    if not lazy or info["class"] is None:
        info["class"] = type(lm.model).__name__
        lm.load_seconds = time.perf_counter() - start
        lm.touched = False
    return lm


# the process's model pool: the jobs of an in-process multirun share loaded models

_POOL: dict[tuple, LoadedModel] = {}


def pool_key(spec: str, device: str, dtype: str, revision: str | None, trust_remote_code: bool = False) -> tuple:
    """The spec, its load options and for a local directory its weight files' names, sizes and mtimes."""
    local = os.path.expanduser(str(spec))
    stamp: tuple[tuple[str, int, int], ...] = ()
    if os.path.isdir(local):
        stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in weight_files(local))
    return (str(spec), str(device), str(dtype), revision, bool(trust_remote_code), stamp)


def pooled(spec: str, *, device: str = "auto", dtype: str = "auto", revision: str | None = None,
           trust_remote_code: bool = False) -> LoadedModel:
    """``load_model(spec, lazy=True)``, or the same model again if this process has it."""
    key = pool_key(spec, device, dtype, revision, trust_remote_code)
    lm = _POOL.get(key)
    if lm is not None:
        lm.reused = lm.loaded  # weights already in memory: this job does not load them
        lm.touched = False
        return lm
    lm = load_model(spec, device=device, dtype=dtype, revision=revision, trust_remote_code=trust_remote_code,
                    lazy=True)
    _POOL[key] = lm
    return lm


def retain(keys: list[tuple]) -> None:
    """Drop every pooled model but those of ``keys`` (the next job's), freeing their memory."""
    dropped = [k for k in _POOL if k not in keys]
    for k in dropped:
        _POOL.pop(k).release()
    if dropped and torch.cuda.is_available():
        torch.cuda.empty_cache()


def not_cached(spec: str, why: str) -> str:
    return (f"model {spec!r}: the Hugging Face hub is unreachable ({why}) and the model is not in the local hub "
            f"cache; download it once with network access, or {SPEC_FORMS}{hub.PREDOWNLOADED}")


def load_failure(spec: str, path: str, revision: str | None, err: Exception) -> str:
    """One line saying why ``from_pretrained`` could not load ``spec``."""
    if os.path.isdir(os.path.expanduser(path)):
        return f"model {spec!r}: {path} is not a loadable model directory: {one_line(err)}"
    from huggingface_hub import errors

    chain: list[BaseException] = []  # err and the exceptions it was raised from (each once: chains can loop)
    at: BaseException | None = err
    while at is not None and not any(at is e for e in chain):
        chain.append(at)
        at = at.__cause__ or at.__context__

    def caused_by(kind) -> bool:
        return any(isinstance(e, kind) for e in chain)

    if caused_by(errors.LocalEntryNotFoundError):
        return not_cached(spec, "or HF_HUB_OFFLINE is set")
    if caused_by(errors.GatedRepoError):  # before RepositoryNotFoundError, its base class
        return f"model {spec!r}: the hub model is gated; accept its terms and log in (hf auth login)"
    if caused_by(errors.RepositoryNotFoundError):
        return f"model {spec!r}: no such model on the Hugging Face hub (or it is private), and no such local directory"
    if caused_by(errors.RevisionNotFoundError):
        return f"model {spec!r}: the hub model has no revision {revision!r}"
    return f"model {spec!r}: could not load it: {one_line(err)}"


def early_exit(lm: LoadedModel, layers: int | str = "auto") -> LoadedModel:
    """``lm`` cut after its first ``layers`` decoder layers (``auto``: a third), weights shared."""
    if lm.is_encoder_decoder:
        raise ConfigError(f"early exit is for decoder-only models; {lm.name!r} is an encoder-decoder model: give the "
                          "amateur a smaller model of its family (pair.amateur.path) and pair.amateur.early_exit=null")
    total = (None if lm.loaded else lm.info.get("layers")) or len(decoder_layers(lm.model))
    try:
        k = max(1, round(total / 3)) if layers in ("auto", None) else int(layers)
    except (TypeError, ValueError):
        k = None
    if k is None or not 1 <= k <= total:
        raise ConfigError(f"early_exit must be auto or a layer count between 1 and {total}, got {layers!r}")
    config = None if lm.config is None else cut_config(lm.config, k)
    return lm.cut(k, dict(lm.info, early_exit=k, layers=k), config, lambda: cut_model(lm.model, k))


def cut_config(config, k: int):
    """A copy of ``config`` with its first k layers."""
    config = copy.deepcopy(config)
    config.num_hidden_layers = k
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[:k]
    return config


def cut_model(model: nn.Module, k: int) -> nn.Module:
    """A shallow copy of ``model`` whose decoder runs its first k layers (weights shared)."""
    config = cut_config(model.config, k)
    base = decoder_base(model)
    new_base = copy.copy(base)
    new_base._modules = dict(base._modules)
    new_base.layers = nn.ModuleList(list(decoder_layers(model))[:k])
    new_base.config = config
    new_model = copy.copy(model)
    new_model._modules = dict(model._modules)
    base_name = next(name for name, module in model._modules.items() if module is base)
    setattr(new_model, base_name, new_base)
    new_model.config = config
    return new_model


def check_same_vocabulary(a: LoadedModel, b: LoadedModel) -> None:
    """Token-level methods compare p_exp and p_ama of the same token: the tokenizers must agree."""
    va, vb = a.tokenizer.get_vocab(), b.tokenizer.get_vocab()
    if va != vb:
        raise ConfigError(f"expert {a.name!r} and amateur {b.name!r} do not share a vocabulary ({len(va)} vs "
                          f"{len(vb)} tokens; {len(set(va) - set(vb))} only in the expert, "
                          f"{len(set(vb) - set(va))} only in the amateur). "
                          "Token-level methods need two models of one family with the same tokenizer.")


def check_same_kind(a: LoadedModel, b: LoadedModel) -> None:
    """Expert and amateur are both decoder-only or both encoder-decoder: one item encoding for both."""
    if a.is_encoder_decoder != b.is_encoder_decoder:
        kind = {True: "an encoder-decoder (seq2seq) model", False: "a decoder-only (causal) model"}
        raise ConfigError(f"expert {a.name!r} is {kind[a.is_encoder_decoder]} but amateur {b.name!r} is "
                          f"{kind[b.is_encoder_decoder]}; a pair needs two models of one kind and family")
