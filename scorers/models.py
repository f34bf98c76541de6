"""Loading causal LMs and encoder-decoder (seq2seq) models: hub id, local directory or a
PyPI-packaged GGUF file; early-exit amateurs (causal LMs only).

Model specs (``pair.expert.path``):
  * a hub id (``Qwen/Qwen2.5-3B-Instruct``) or a local directory: ``from_pretrained``;
  * ``gguf:<name>`` for a GGUF file shipped in a PyPI wheel (see ``PACKAGED_GGUF``), or
    ``gguf:/path/to/file.gguf``: converted once by transformers and cached on disk.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from cscore.errors import ConfigError
from cscore.scorers.anatomy import decoder_base, decoder_layers
from cscore.scorers.gguf import ModelSpecError, one_line, resolve_path

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
    table = {"float32": torch.float32, "fp32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise ConfigError(f"unknown dtype {dtype!r}; use auto or one of {sorted(table)}")
    return table[dtype]


@dataclass
class LoadedModel:
    """A causal LM (or an encoder-decoder model) ready for scoring, with its tokenizer and identity."""

    model: nn.Module
    tokenizer: object
    name: str
    device: torch.device
    dtype: torch.dtype
    load_seconds: float = 0.0
    info: dict = field(default_factory=dict)
    parent: "LoadedModel | None" = None  # for an early exit: the full model it is cut from
    exit_layer: int | None = None
    is_encoder_decoder: bool = False  # loaded with AutoModelForSeq2SeqLM (T5, BART, ...)


def load_model(spec: str, *, device: str = "auto", dtype: str = "auto", revision: str | None = None,
               trust_remote_code: bool = False) -> LoadedModel:
    """Load tokenizer + model by hub id, local directory or ``gguf:`` spec: a causal LM, or a
    seq2seq model when its config ``is_encoder_decoder``. A spec that names nothing loadable
    raises ``ModelSpecError`` (an ``InputError``) with a one-line message."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    start = time.perf_counter()
    path, fingerprint = resolve_path(spec)
    check_local_path(spec, path)
    dev = auto_device(device)
    torch_dtype = auto_dtype(dtype, dev)
    kwargs = {"revision": revision} if revision else {}
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **kwargs)
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, **kwargs)
        seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
        model = auto.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code, **kwargs)
    except (OSError, ValueError) as err:  # ValueError: e.g. a config.json transformers does not know
        raise ModelSpecError(load_failure(spec, path, revision, err)) from err
    model.to(dev)
    model.eval()
    model.requires_grad_(False)
    info = {"spec": spec, "path": path, "revision": revision, "fingerprint": fingerprint,
            "class": type(model).__name__, "layers": getattr(model.config, "num_hidden_layers", None),
            "commit": getattr(model.config, "_commit_hash", None)}
    if seq2seq:
        info["encoder_decoder"] = True
    return LoadedModel(model, tok, spec, dev, torch_dtype, time.perf_counter() - start, info,
                       is_encoder_decoder=seq2seq)


SPEC_FORMS = "give a local model directory, a hub id such as Qwen/Qwen2.5-3B-Instruct, or a gguf: spec"


def looks_local(path: str) -> bool:
    """A path rather than a hub id: starts with / . ~, or has more than the one / of owner/name."""
    return path.startswith(("/", ".", "~")) or path.count("/") > 1


def check_local_path(spec: str, path: str) -> None:
    """A clear error for a local path that is no model directory (before transformers tries the hub)."""
    local = os.path.expanduser(path)
    if os.path.isdir(local):
        if not os.path.isfile(os.path.join(local, "config.json")):
            raise ModelSpecError(f"model {spec!r}: {path} has no config.json, so it is not a saved transformers model "
                                 f"({SPEC_FORMS})")
        return
    if not (looks_local(path) or os.path.exists(local)):
        return
    if os.path.isfile(local):
        hint = f"for a GGUF file use gguf:{path}" if path.endswith(".gguf") else SPEC_FORMS
        raise ModelSpecError(f"model {spec!r}: {path} is a file, not a model directory ({hint})")
    raise ModelSpecError(f"model {spec!r}: local directory not found: {path} ({SPEC_FORMS})")


def load_failure(spec: str, path: str, revision: str | None, err: Exception) -> str:
    """One line saying why ``from_pretrained`` could not load ``spec``."""
    if os.path.isdir(os.path.expanduser(path)):
        return f"model {spec!r}: {path} is not a loadable model directory: {one_line(err)}"
    from huggingface_hub import errors as hub

    def caused_by(kind) -> bool:
        return any(isinstance(e, kind) for e in error_chain(err))

    if caused_by(hub.LocalEntryNotFoundError):
        return (f"model {spec!r}: the Hugging Face hub is unreachable (or HF_HUB_OFFLINE is set) and the "
                f"model is not in the local hub cache; download it once with network access, or {SPEC_FORMS}")
    if caused_by(hub.GatedRepoError):  # before RepositoryNotFoundError, its base class
        return f"model {spec!r}: the hub model is gated; accept its terms and log in (hf auth login)"
    if caused_by(hub.RepositoryNotFoundError):
        return f"model {spec!r}: no such model on the Hugging Face hub (or it is private), and no such local directory"
    if caused_by(hub.RevisionNotFoundError):
        return f"model {spec!r}: the hub model has no revision {revision!r}"
    return f"model {spec!r}: could not load it: {one_line(err)}"


def error_chain(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from (each once: chains can loop)."""
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    return chain


def early_exit(lm: LoadedModel, layers: int | str = "auto") -> LoadedModel:
    """The first ``layers`` decoder layers of ``lm`` followed by its final norm and LM head.
    Shares every weight with ``lm`` (no copy). ``auto`` keeps a third of the layers."""
    if lm.is_encoder_decoder:
        raise ConfigError(f"early exit is for decoder-only models; {lm.name!r} is an encoder-decoder model: give "
                          "the amateur a smaller model of its family (pair.amateur.path) and pair.amateur.early_exit=null")
    model = lm.model
    total = len(decoder_layers(model))
    try:
        k = max(1, round(total / 3)) if layers in ("auto", None) else int(layers)
    except (TypeError, ValueError):
        k = None
    if k is None or not 1 <= k <= total:
        raise ConfigError(f"early_exit must be auto or a layer count between 1 and {total}, got {layers!r}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = k
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[:k]
    base = decoder_base(model)
    new_base = copy.copy(base)
    new_base._modules = dict(base._modules)
    new_base.layers = nn.ModuleList(list(base.layers)[:k])
    new_base.config = config
    new_model = copy.copy(model)
    new_model._modules = dict(model._modules)
    base_name = next(name for name, module in model._modules.items() if module is base)
    setattr(new_model, base_name, new_base)
    new_model.config = config
    info = dict(lm.info, early_exit=k, layers=k)
    return LoadedModel(new_model, lm.tokenizer, f"{lm.name}[:{k}]", lm.device, lm.dtype, 0.0, info,
                       parent=lm, exit_layer=k)


def check_same_vocabulary(a: LoadedModel, b: LoadedModel) -> None:
    """Token-level methods compare p_exp and p_ama of the same token: the tokenizers must agree."""
    va, vb = a.tokenizer.get_vocab(), b.tokenizer.get_vocab()
    if va != vb:
        only_a = len(set(va) - set(vb))
        only_b = len(set(vb) - set(va))
        raise ConfigError(
            f"expert {a.name!r} and amateur {b.name!r} do not share a vocabulary "
            f"({len(va)} vs {len(vb)} tokens; {only_a} only in the expert, {only_b} only in the amateur). "
            "Token-level methods need two models of one family with the same tokenizer."
        )


def check_same_kind(a: LoadedModel, b: LoadedModel) -> None:
    """Expert and amateur are both decoder-only or both encoder-decoder: one item encoding for both."""
    if a.is_encoder_decoder != b.is_encoder_decoder:
        kind = {True: "an encoder-decoder (seq2seq) model", False: "a decoder-only (causal) model"}
        raise ConfigError(f"expert {a.name!r} is {kind[a.is_encoder_decoder]} but amateur {b.name!r} is "
                          f"{kind[b.is_encoder_decoder]}; a pair needs two models of one kind and family")
