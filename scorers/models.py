"""Loading causal LMs: hub id, local directory or a PyPI-packaged GGUF file; early-exit amateurs.

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

from cscore.scorers.engine import decoder_base
from cscore.scorers.gguf import resolve_path

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
        raise ValueError(f"unknown dtype {dtype!r}; use auto or one of {sorted(table)}")
    return table[dtype]


@dataclass
class LoadedModel:
    """A causal LM ready for scoring, with its tokenizer and identity."""

    model: nn.Module
    tokenizer: object
    name: str
    device: torch.device
    dtype: torch.dtype
    load_seconds: float = 0.0
    info: dict = field(default_factory=dict)
    parent: "LoadedModel | None" = None  # for an early exit: the full model it is cut from
    exit_layer: int | None = None


def load_model(spec: str, *, device: str = "auto", dtype: str = "auto", revision: str | None = None,
               trust_remote_code: bool = False) -> LoadedModel:
    """Load tokenizer + causal LM by hub id, local directory or ``gguf:`` spec."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    path, fingerprint = resolve_path(spec)
    if path.startswith(("/", ".", "~")) and not os.path.isdir(os.path.expanduser(path)):
        raise FileNotFoundError(f"model directory not found: {path!r} (give a local directory, a hub id "
                                "such as Qwen/Qwen2.5-3B-Instruct, or a gguf: spec)")
    dev = auto_device(device)
    torch_dtype = auto_dtype(dtype, dev)
    kwargs = {"revision": revision} if revision else {}
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code,
                                                     **kwargs)
    except OSError as err:
        raise OSError(f"could not load model {spec!r} (resolved to {path!r}): {err}") from err
    model.to(dev)
    model.eval()
    model.requires_grad_(False)
    info = {"spec": spec, "path": path, "revision": revision, "fingerprint": fingerprint,
            "class": type(model).__name__, "layers": getattr(model.config, "num_hidden_layers", None),
            "commit": getattr(model.config, "_commit_hash", None)}
    return LoadedModel(model, tok, spec, dev, torch_dtype, time.perf_counter() - start, info)


def decoder_layers(model: nn.Module) -> tuple[nn.Module, str]:
    base = decoder_base(model)
    layers = getattr(base, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"early exit needs a decoder with a `layers` list; {type(model).__name__} has none")
    return base, "layers"


def early_exit(lm: LoadedModel, layers: int | str = "auto") -> LoadedModel:
    """The first ``layers`` decoder layers of ``lm`` followed by its final norm and LM head.
    Shares every weight with ``lm`` (no copy). ``auto`` keeps a third of the layers."""
    model = lm.model
    base, attr = decoder_layers(model)
    total = len(getattr(base, attr))
    k = max(1, round(total / 3)) if layers in ("auto", None) else int(layers)
    if not 1 <= k <= total:
        raise ValueError(f"early_exit must be between 1 and {total} layers, got {k}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = k
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[:k]
    new_base = copy.copy(base)
    new_base._modules = dict(base._modules)
    setattr(new_base, attr, nn.ModuleList(list(getattr(base, attr))[:k]))
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
        raise ValueError(
            f"expert {a.name!r} and amateur {b.name!r} do not share a vocabulary "
            f"({len(va)} vs {len(vb)} tokens; {only_a} only in the expert, {only_b} only in the amateur). "
            "Token-level methods need two models of one family with the same tokenizer."
        )
