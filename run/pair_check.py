"""The models of a composed ``cscore run`` config, checked before any data loads: each can load here, the pair's
tokenizers agree where the method needs them to, and ``runtime.max_length`` fits the shortest prompt."""

from __future__ import annotations

import functools
import json
import os

from cscore.config.run import RunConfig
from cscore.errors import ConfigError
from cscore.scorers.models import hub, specs

CHEAP_FACTOR, CHEAP_SLACK = 2, 8  # tokens <= 2 x UTF-8 bytes + 8 for any tokenizer: no need to count


def needed_models(run: RunConfig) -> dict[str, tuple[str, str | None]]:
    """{role: (spec, revision)} of the models the run loads (an early-exit amateur is the expert's)."""
    from cscore.run.variants import models_needed

    models = {role: getattr(run.pair, role) for role in models_needed(list(run.method_plan.rows))}
    return {role: (str(m.path), m.revision) for role, m in models.items() if m.path is not None}


def check(c: dict, run: RunConfig) -> None:
    """A one-line ConfigError for the first model that cannot load here (``c``: the config as a plain dict)."""
    models = needed_models(run)
    offline = {role: why for role, (spec, revision) in models.items()  # {role: why it is not here}
               if spec_kind(f"pair.{role}.path", spec) == "hub" and (why := hub.usable_offline(spec, revision))}
    if offline:
        raise ConfigError(hub_message({role: models[role][0] for role in offline}, [*offline.values()][-1]))
    for key, (spec, revision) in kind_models(c).items():  # the kind's own models, as the pair's
        if spec_kind(key, spec) == "hub" and (unreachable := hub.usable_offline(spec, revision)):
            raise ConfigError(f"set {key}= to a local model directory: {spec} is a hub model not in the local hub "
                              f"cache, and the Hugging Face hub is unreachable ({unreachable}){hub.PREDOWNLOADED}")
    check_cross_family(c, models)
    if "expert" in models:
        check_max_length(c, *models["expert"])


def spec_kind(key: str, spec: str) -> str:
    """``specs.check_spec(spec)``; its refusal as a ConfigError naming ``key``."""
    try:
        return specs.check_spec(spec)
    except specs.ModelSpecError as err:
        raise ConfigError(f"{key}={spec}: {str(err).removeprefix(f'model {spec!r}: ')}") from None


def kind_models(c: dict) -> dict[str, tuple[str, str | None]]:
    """{key: (spec, revision)} of the models the method's kind loads beyond the pair (``MethodKind.other_models``)."""
    from cscore.run import kinds

    name = c["method"].get("name")
    return kinds.of_method(name).other_models(c) if name else {}


def check_cross_family(c: dict, models: dict[str, tuple[str, str | None]]) -> None:
    """A ConfigError when the pair's tokenizers differ and ``methods.cross_family_refusal`` refuses the method."""
    from cscore.scorers import methods

    if "expert" not in models or "amateur" not in models or models["expert"] == models["amateur"]:
        return
    why = methods.cross_family_refusal(c["method"]["name"], c["method"])
    if why is None:
        return
    expert, amateur = tokenizer_of(*models["expert"]), tokenizer_of(*models["amateur"])
    if expert is None or amateur is None or expert[1] or amateur[1]:
        return  # not readable here (the run checks when it loads), or seq2seq (refused at load)
    if expert[0].get_vocab() != amateur[0].get_vocab():
        raise ConfigError(why)


def hub_message(offline: dict[str, str], why: str) -> str:
    """``offline``: {role: its hub spec}."""
    keys = " and ".join(f"pair.{role}.path=" for role in offline)
    given = " and ".join(offline.values())
    here = []  # the packaged gguf: models installed here
    for name in specs.PACKAGED_GGUF:
        try:
            specs.packaged_files(name)
        except specs.ModelSpecError:
            continue
        here.append(f"gguf:{name}")
    hint = f" (installed here: {', '.join(here)})" if here else ""
    return (f"set {keys} to a local model directory or a gguf: spec{hint}: {given} "
            f"{'is a hub model' if len(offline) == 1 else 'are hub models'} not in the local hub cache, "
            f"and the Hugging Face hub is unreachable ({why}){hub.PREDOWNLOADED}")


def shortest_prompts(c: dict) -> dict[str, str]:
    """{what: text}: each prompt the run may build, with its source removed."""
    from cscore.data import prompts, registry

    p = c["prompt"]
    source = p.get("condition", "source") == "source"
    table = dict(prompts.TEMPLATES if source else prompts.REFERENCE_TEMPLATES)
    table.update((p.get("templates") if source else p.get("reference_templates")) or {})
    chosen = c["data"].get("template") or c["data"].get("task") or registry.task_of(c["data"].get("name"))
    if chosen is not None:
        table = {str(chosen): table.get(chosen, prompts.TEMPLATES.get(chosen, chosen))}
    out = {}
    for task, template in table.items():
        if not isinstance(template, str) or "{source}" not in template:
            continue  # the prompt builder names a bad template when the run reaches it
        if "{target_language}" not in template:
            out[f"{task} template"] = template.replace("{source}", "")
            continue
        for language in sorted(set(prompts.LANGUAGES.values())):
            out[f"{task} template for {language}"] = template.replace("{source}", "").replace("{target_language}",
                                                                                               language)
    return out


def check_max_length(c: dict, spec: str, revision: str | None) -> None:
    limit = c["runtime"]["max_length"]
    texts = shortest_prompts(c)
    if not texts or any(CHEAP_FACTOR * len(t.encode()) + CHEAP_SLACK + 1 <= limit for t in texts.values()):
        return
    from cscore.run import kinds

    if not kinds.of_method(c["method"]["name"]).scoring_prompt:
        return  # a judge builds its own prompts (runtime.max_length is checked as it does)
    loaded = tokenizer_of(spec, revision)
    if loaded is None:
        return
    tok, seq2seq = loaded
    counts = {what: prompt_tokens(tok, text, seq2seq) for what, text in texts.items()}
    what, n = min(counts.items(), key=lambda kv: kv[1])
    need = n if seq2seq else n + 1
    if need > limit:
        raise ConfigError(f"runtime.max_length={limit} is too small for any item: the shortest prompt this run can "
                          f"build (the {what}, with its source removed) is {n} tokens for the expert's "
                          f"tokenizer{'' if seq2seq else ', and a hypothesis needs at least one more'}; "
                          "raise runtime.max_length (default 1024)")


def prompt_tokens(tok, text: str, seq2seq: bool) -> int:
    """Tokens of a prompt as ``scorers.tokenize.encode`` counts them; ``tok``: transformers' or ``tokenizers``'."""
    if not (text or seq2seq):
        return 1
    if hasattr(tok, "encode_batch"):  # tokenizers.Tokenizer
        return max(len(tok.encode(text, add_special_tokens=seq2seq).ids), 1)
    return max(len(tok(text, add_special_tokens=seq2seq)["input_ids"]), 1)


def fast_tokenizer(file: str | os.PathLike):
    """A ``tokenizer.json`` read by ``tokenizers`` alone (no torch or transformers to import)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(file))


@functools.cache
def tokenizer_of(spec: str, revision: str | None):
    """(tokenizer, is encoder-decoder) read without weights or network, or None where that cannot be done here;
    a folder's ``tokenizer.json`` is read with ``tokenizers``, transformers only without one."""
    if spec.startswith("gguf:"):
        from cscore.scorers.models import gguf

        file = gguf.cached_tokenizer_file(spec)
        return (fast_tokenizer(file) if file is not None else gguf.load_tokenizer(spec)), False
    if specs.kind(spec) == "local":
        folder = os.path.expanduser(spec)
    else:
        from huggingface_hub import try_to_load_from_cache

        config = try_to_load_from_cache(spec, "config.json", revision=revision)
        if not isinstance(config, str):
            return None
        folder = os.path.dirname(config)
    try:
        with open(os.path.join(folder, "config.json")) as f:
            seq2seq = bool(json.load(f).get("is_encoder_decoder", False))
        if os.path.isfile(os.path.join(folder, "tokenizer.json")):
            return fast_tokenizer(os.path.join(folder, "tokenizer.json")), seq2seq
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(folder), seq2seq
    except Exception:  # no usable tokenizer files (tokenizers raises plain Exception): the run says so at load
        return None
