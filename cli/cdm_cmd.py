"""``cscore cdm generate`` and ``cscore cdm train`` (Generative CDM, the CDM paper's Algorithm 1);
the score step of ``method=cdm_gen`` is the discriminator kind (``scorers/kinds/discriminator.py``).

Both commands compose ``conf/cdm.yaml`` (= config.yaml + a ``cdm:`` section) with Hydra's override
syntax, so ``data=``, ``pair=``, ``prompt=`` and ``runtime.*`` mean what they mean for ``cscore run``.

generate  positives (``cdm.generate.positives``) -> negatives made by ``cscore.scorers.cdm_generate``.
          Writes <out>/negatives.jsonl (one record per negative, appended one positive at a time)
          and <out>/provenance.json (config, models, versions, counts; ``complete`` once done).
          Re-running the same config into the same out= skips the positives already written.
train     <input>/negatives.jsonl -> a discriminator: label 1 = positive, 0 = negative; the groups
          (documents / dialogues) are split into train and held-out (``cdm.train.holdout``), the
          model is trained on the train groups only and its accuracy reported on both. Writes the
          model and <out>/cscore_discriminator.json last (its presence marks a finished directory).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.errors import ConfigError
from cscore.scorers.cdm_discriminator import classifier_log_odds, encode_texts, load_classifier, pair_record
from cscore.scorers.methods.params import Param

log = logging.getLogger("cscore")

USAGE = """usage: cscore cdm <generate|train> [hydra overrides]

  generate   make negatives from positives with the degraded amateur p_a^- of the pair
             e.g. cscore cdm generate data=demo cdm.generate.strategy=multi cdm.generate.out=outputs/cdm/neg
  train      train a discriminator on a generate directory
             e.g. cscore cdm train cdm.train.input=outputs/cdm/neg cdm.train.out=outputs/cdm/disc
                  cscore cdm train cdm.train.input=... cdm.train.discriminator=/models/my-classifier
  then       cscore run method=cdm_gen model=outputs/cdm/disc

Options: conf/cdm.yaml (cdm.generate.*, cdm.train.*); --cfg prints the composed cdm section."""

NEGATIVES = "negatives.jsonl"
PROVENANCE = "provenance.json"
POSITIVES = ("hypothesis", "reference", "top_rated")
TEXTS = ("hypothesis", "prompt_hypothesis")

GENERATE_PARAMS = {
    "positives": Param(str, choices=POSITIVES), "aspect": Param(str, nullable=True),
    "limit": Param(int, lo=1, nullable=True), "strategy": Param(str, choices=("span", "sentence", "utterance", "multi")),
    "max_span": Param(int, lo=1), "n_segments": Param(int, lo=1), "n_negatives": Param(int, lo=1),
    "gamma": Param(float, lo=0.0), "temperature": Param(float, lo=0.0, lo_open=True),
    "top_k": Param(int, lo=1, nullable=True), "top_p": Param(float, lo=0.0, hi=1.0, lo_open=True, nullable=True),
    "fill_tokens": Param(int, lo=1, nullable=True), "max_tries": Param(int, lo=1),
    "on_identical": Param(str, choices=("keep", "drop")), "seed": Param(int), "out": Param(str, nullable=True),
}
TRAIN_PARAMS = {
    "input": Param(str, nullable=True), "out": Param(str, nullable=True), "discriminator": Param(str),
    "holdout": Param(float, lo=0.0, hi=1.0, lo_open=True), "seed": Param(int), "l2": Param(float, lo=0.0, lo_open=True),
    "t": Param(float, lo=0.0, lo_open=True), "clamp": Param(float, hi=0.0, nullable=True),
    "text": Param(str, choices=TEXTS), "epochs": Param(int, lo=1), "lr": Param(float, lo=0.0, lo_open=True),
    "batch_size": Param(int, lo=1), "max_length": Param(int, lo=2),
}


# ---------------------------------------------------------------------------------------------
# the command


def main(argv: list[str]) -> None:
    from cscore.cli.exits import fail, one_line_errors

    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    stage, rest = argv[0], argv[1:]
    if stage not in ("generate", "train"):
        fail(f"unknown cdm command {stage!r}; use cscore cdm generate | train (cscore cdm --help)", 2)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    with one_line_errors("interrupted; what was written is kept and the same command resumes"):
        cfg, overrides = parse(rest)
        if "--cfg" in rest:
            print(OmegaConf.to_yaml(cfg.cdm))
            return
        out = generate(cfg, overrides) if stage == "generate" else train(cfg, overrides)
        print(f"cdm {stage}: {out}")


def compose(overrides: list[str]) -> DictConfig:
    """conf/cdm.yaml with the overrides; a misspelt key or option is a one-line ConfigError."""
    from cscore.cli.compose import compose as compose_stage

    return compose_stage("cdm", overrides, {"cdm.generate": GENERATE_PARAMS, "cdm.train": TRAIN_PARAMS})


def parse(argv: list[str]) -> tuple[DictConfig, list[str]]:
    """(composed config, overrides) of a command line (``--cfg`` left out)."""
    overrides = [a for a in argv if a != "--cfg"]
    return compose(overrides), overrides


def checked(section: DictConfig, specs: dict, prefix: str) -> dict:
    given = OmegaConf.to_container(section, resolve=True)
    from cscore.cli.validate import check_keys

    check_keys(prefix, given, set(specs))
    return {k: spec.check(f"{prefix}.{k}", given.get(k)) for k, spec in specs.items()}


def out_dir(given: str | None, stage: str) -> Path:
    if given:
        return Path(given).expanduser()
    return Path("outputs") / "cdm" / stage / time.strftime("%Y-%m-%d_%H-%M-%S")


def versions() -> dict:
    import torch
    import transformers

    import cscore

    return {"cscore": cscore.__version__, "torch": torch.__version__, "transformers": transformers.__version__}


def write_json(path: Path, obj) -> None:
    rundir.write_text_atomic(path, json.dumps(obj, indent=1, default=float) + "\n")


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# generate


def select_positives(examples, which: str, aspect: str | None):
    """The rows whose text is a positive, with a ``text`` column and the id negatives are named after.
    hypothesis: every row; reference: one row per (group, reference), text = the reference, id =
    <group>/reference; top_rated: per group the row with the highest human.<aspect> (ties: the first)."""
    table = examples.copy()
    if which == "hypothesis":
        table["text"] = table["hypothesis"]
        return table.reset_index(drop=True)
    if which == "reference":
        has = table["reference"].map(lambda r: isinstance(r, str) and bool(r.strip()))
        if not has.any():
            raise ConfigError("cdm.generate.positives=reference but this data has no references; use hypothesis "
                              "or top_rated")
        table = table[has].drop_duplicates(["group", "reference"]).copy()
        table["text"] = table["reference"]
        table["system"] = "reference"
        dup = table.duplicated("group", keep=False)
        table["id"] = [f"{g}/reference" + (f"{k}" if d else "") for k, (g, d) in enumerate(zip(table["group"], dup))]
        return table.reset_index(drop=True)
    from cscore.scorers.kinds.pooler import target_aspect

    col = f"{rundir.HUMAN}{target_aspect(table, aspect)}"
    table = table[np.isfinite(table[col].to_numpy(dtype=float))]
    best = table.groupby("group", sort=False)[col].idxmax()
    table = table.loc[best.to_numpy()].copy()
    table["text"] = table["hypothesis"]
    return table.reset_index(drop=True)


def read_records(path: Path) -> list[dict]:
    """The records of a negatives.jsonl: its complete lines (every record ends with a line break;
    text after the last one was cut off by a kill and is ignored)."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    records = []
    for i, line in enumerate(raw[:raw.rfind(b"\n") + 1].splitlines()):
        try:
            records.append(json.loads(line))
        except ValueError:
            raise ConfigError(f"{path}: line {i + 1} is not JSON; the file was changed by hand") from None
    return records


def finished_records(path: Path, per_positive: int) -> list[dict]:
    """The records of the positives that have all ``per_positive`` negatives written; the file is
    rewritten without the rest (a positive cut off by a kill is then made again, identically)."""
    records = read_records(path)
    n = {}
    for r in records:
        n[r["source_id"]] = n.get(r["source_id"], 0) + 1
    keep = [r for r in records if n[r["source_id"]] == per_positive]
    if path.exists() and (len(keep) < len(records) or not path.read_bytes().endswith(b"\n") and path.stat().st_size):
        rundir.write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep))
    return keep


def generate_identity(cfg: DictConfig, g: dict) -> dict:
    """What decides the negatives: a directory holds the output of one identity only."""
    return {"data": OmegaConf.to_container(cfg.data, resolve=True), "split": OmegaConf.to_container(cfg.split),
            "pair": pair_record(cfg), "prompt": OmegaConf.to_container(cfg.prompt, resolve=True),
            "max_length": cfg.runtime.max_length, "dtype": cfg.runtime.dtype,
            "generate": {k: v for k, v in g.items() if k not in ("out", "limit")}}


def counts(records: list[dict]) -> dict:
    spans = [s for r in records for s in r["spans"]]
    return {"positives": len({r["source_id"] for r in records}), "negatives_written": len(records),
            "negatives_kept": sum(not r["dropped"] for r in records),
            "identical_kept": sum(r["identical"] and not r["dropped"] for r in records),
            "identical_dropped": sum(r["dropped"] for r in records),
            "segments": len(spans), "identical_fills": sum(s["identical"] for s in spans),
            "resampled_segments": sum(s["tries"] > 1 for s in spans), "draws": sum(s["tries"] for s in spans),
            "fewer_segments": sum(r["segments"] < r["segments_asked"] for r in records),
            "no_segment": sum(r["segments"] == 0 for r in records)}


def generate(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """Make the negatives (module doc); returns the output directory. ``overrides``: the command
    line, for the pair's early-exit rule (as in ``cscore run``)."""
    from cscore.cli.run import resolve_pair
    from cscore.cli.stages import load_stage
    from cscore.scorers.kinds.shared import load_pair, make_prompts
    from cscore.cli.validate import validate
    from cscore.scorers import cdm_generate as cg

    g = checked(cfg.cdm.generate, GENERATE_PARAMS, "cdm.generate")
    validate(cfg)
    resolve_pair(cfg, list(overrides))
    out = out_dir(g["out"], "generate")
    identity = generate_identity(cfg, g)
    prov_file, neg_file = out / PROVENANCE, out / NEGATIVES
    previous = json.loads(prov_file.read_text()) if prov_file.exists() else None
    if previous is not None and previous.get("identity") != identity:
        changed = sorted(k for k in identity if previous.get("identity", {}).get(k) != identity[k])
        raise ConfigError(f"{out} holds negatives of another config (it differs in {', '.join(changed)}); "
                          "give another cdm.generate.out or remove that directory")
    if previous is None and neg_file.exists():
        raise ConfigError(f"{out} has a {NEGATIVES} but no {PROVENANCE}: not a cscore cdm generate directory")

    loaded = load_stage(cfg)
    positives = select_positives(loaded.examples, g["positives"], g["aspect"])
    if g["limit"] is not None:
        positives = positives.head(g["limit"])
    records = finished_records(neg_file, g["n_negatives"])
    done = {r["source_id"] for r in records}
    todo = positives[~positives["id"].astype(str).isin(done)].reset_index(drop=True)
    log.info("cdm generate: %d positives (%s), %d done earlier, %d to do -> %s", len(positives), g["positives"],
             len(positives) - len(todo), len(todo), out)
    out.mkdir(parents=True, exist_ok=True)
    prov = previous or {"identity": identity, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    models = prov.get("models")
    if len(todo):
        pair = load_pair(cfg, ["expert", "amateur"])
        from cscore.scorers.identity import model_identity

        models = {role: {"spec": m.name, "identity": model_identity(m), "class": m.info.get("class")}
                  for role, m in pair.models.items()}
        prompts, spans = make_prompts(cfg, todo, pair.tokenizer)
        inputs = pair.encode(prompts, list(todo["text"]), max_length=cfg.runtime.max_length, source_spans=spans)
        settings = cg.Settings(strategy=g["strategy"], max_span=g["max_span"], n_segments=g["n_segments"],
                               seed=g["seed"], n_negatives=g["n_negatives"], max_tries=g["max_tries"],
                               on_identical=g["on_identical"], fill_tokens=g["fill_tokens"],
                               sampling=cg.Sampling(g["gamma"], g["temperature"], g["top_k"], g["top_p"]))
        sampler = cg.DegradedSampler(pair, settings.sampling)
        write_json(prov_file, {**prov, "complete": False, "config": OmegaConf.to_container(cfg, resolve=True),
                               "models": models, "versions": versions()})
        start, every = time.perf_counter(), max(1, len(todo) // 10)
        with open(neg_file, "a", encoding="utf-8") as f:
            for i, row in enumerate(todo.itertuples(index=False)):
                item = inputs.items[i]
                made = cg.make_negatives(sampler, str(row.id), item.prompt, row.text, settings)
                lines = []
                for r in made:
                    rec = {"id": f"{row.id}#neg{r['index']}", "source_id": str(row.id), "group": str(row.group),
                           "system": str(row.system), "prompt": item.prompt, "prompt_truncated": item.truncated,
                           "positive": row.text, "negative": r["negative"], "spans": r["spans"],
                           "strategy": g["strategy"], "gamma": g["gamma"], "seed": g["seed"],
                           "tries": sum(s["tries"] for s in r["spans"]), "identical": r["identical"],
                           "dropped": r["dropped"], "segments": r["segments"], "segments_asked": r["segments_asked"]}
                    lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
                f.write("".join(lines))  # all negatives of a positive in one write: resume skips whole positives
                f.flush()
                if cfg.runtime.progress and ((i + 1) % every == 0 or i + 1 == len(todo)):
                    log.info("  %d/%d positives (%.1fs)", i + 1, len(todo), time.perf_counter() - start)
    records = read_records(neg_file)
    c = counts(records)
    prov = {**prov, "complete": True, "config": OmegaConf.to_container(cfg, resolve=True), "models": models,
            "versions": versions(), "positives_selected": len(positives), "counts": c,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(prov_file, prov)
    log.info("cdm generate: %d negatives of %d positives (%d identical to their positive: %d kept and flagged, "
             "%d dropped; %d segment fills equal to the removed text after %d draws; %d negatives with fewer "
             "segments than asked)", c["negatives_written"], c["positives"], c["identical_kept"] + c["identical_dropped"],
             c["identical_kept"], c["identical_dropped"], c["identical_fills"], g["max_tries"], c["fewer_segments"])
    return out


# ---------------------------------------------------------------------------------------------
# train


def training_items(folder: Path) -> tuple[list[dict], dict]:
    """(items, provenance): one item per distinct positive (label 1) and per kept negative (label 0)."""
    prov_file = folder / PROVENANCE
    if not folder.is_dir():
        raise ConfigError(f"cdm.train.input={folder}: no such directory (give a `cscore cdm generate` output)")
    if not prov_file.is_file():
        raise ConfigError(f"cdm.train.input={folder} is not a `cscore cdm generate` directory (no {PROVENANCE})")
    prov = json.loads(prov_file.read_text())
    if not prov.get("complete"):
        raise ConfigError(f"cdm.train.input={folder}: the generate run has not finished; run the same "
                          "cscore cdm generate command again to complete it")
    items, seen = [], set()
    for r in read_records(folder / NEGATIVES):
        if r["source_id"] not in seen:
            seen.add(r["source_id"])
            items.append({"id": r["source_id"], "group": r["group"], "prompt": r["prompt"], "text": r["positive"],
                          "label": 1})
        if not r["dropped"]:
            items.append({"id": r["id"], "group": r["group"], "prompt": r["prompt"], "text": r["negative"], "label": 0})
    if not any(i["label"] == 0 for i in items):
        raise ConfigError(f"{folder}: no negatives to train on (all dropped or none written)")
    return items, prov


def split_groups(groups: list[str], holdout: float, seed: int) -> np.ndarray:
    """True for items of held-out groups (ranked by sha256(seed, group), as cscore's dev split)."""
    from cscore.data.splits import dev_groups

    distinct = sorted(set(groups))
    if len(distinct) < 2:
        raise ConfigError(f"the negatives come from {len(distinct)} group(s); a group-held-out split needs at least 2 "
                          "(generate from more documents / dialogues)")
    held = dev_groups(distinct, holdout, seed) or {sorted(distinct, key=lambda x: hashlib.sha256(
        f"{seed}\0{x}".encode()).hexdigest())[0]}
    if len(held) == len(distinct):
        raise ConfigError(f"cdm.train.holdout={holdout} holds out every group; lower it")
    return np.array([g in held for g in groups])


def accuracy(log_odds: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> dict:
    pred = log_odds[mask] > 0
    y = labels[mask] == 1
    return {"n": int(mask.sum()), "accuracy": float(np.mean(pred == y)) if mask.any() else None,
            "positives": int(y.sum()), "negatives": int((~y).sum())}


def train(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """Train the discriminator (module doc); returns the output directory."""
    from cscore.cli.run import resolve_pair
    from cscore.cli.validate import validate

    t = checked(cfg.cdm.train, TRAIN_PARAMS, "cdm.train")
    validate(cfg)
    resolve_pair(cfg, list(overrides))
    if not t["input"]:
        raise ConfigError("cdm.train.input=<a `cscore cdm generate` directory> is required")
    folder = Path(t["input"]).expanduser()
    items, prov = training_items(folder)
    out = out_dir(t["out"], "train")
    kind = "pooler" if t["discriminator"] == "pooler" else "classifier"
    keys = ("l2", "t", "clamp") if kind == "pooler" else ("text", "epochs", "lr", "batch_size", "max_length")
    identity = {"input": str(folder.resolve()), "negatives": digest(prov.get("counts")),
                "generate": digest(prov.get("identity")), "discriminator": t["discriminator"],
                "holdout": t["holdout"], "seed": t["seed"], **{k: t[k] for k in keys}}
    if kind == "pooler":
        identity["pair"] = pair_record(cfg)
    meta_file = out / "cscore_discriminator.json"
    if meta_file.exists():
        old = json.loads(meta_file.read_text())
        if old.get("identity") == identity:
            log.info("cdm train: %s is finished with this config: skipped (remove it to train again)", out)
            return out
        raise ConfigError(f"{out} holds a discriminator trained with another config; give another cdm.train.out")
    groups = [i["group"] for i in items]
    held = split_groups(groups, t["holdout"], t["seed"])
    labels = np.array([i["label"] for i in items], dtype=np.float64)
    for name, mask in (("train", ~held), ("held-out", held)):
        if len(set(labels[mask])) < 2:
            raise ConfigError(f"the {name} groups hold only {'positives' if labels[mask].all() else 'negatives'}; "
                              "generate more negatives or change cdm.train.seed / holdout")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if kind == "pooler":
        record, log_odds = train_pooler_discriminator(cfg, t, items, labels, ~held)
    else:
        record, log_odds = train_classifier(cfg, t, items, labels, ~held, out)
    acc = {"train": accuracy(log_odds, labels, ~held), "held_out": accuracy(log_odds, labels, held)}
    meta = {"kind": kind, **record, "labels": {"1": "positive", "0": "negative (degraded)"},
            "score": "log_odds = log P(positive) - log P(negative); probability = sigmoid(log_odds)",
            "accuracy": acc, "split": {"holdout": t["holdout"], "seed": t["seed"],
                                       "held_out_groups": sorted(set(np.array(groups)[held]))},
            "n_items": len(items), "input": str(folder.resolve()), "generate_counts": prov.get("counts"),
            "identity": identity, "config": OmegaConf.to_container(cfg.cdm.train, resolve=True),
            "versions": versions(), "seconds": round(time.perf_counter() - start, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(meta_file, meta)  # last: marks the directory finished
    log.info("cdm train (%s): accuracy %.3f on %d train items, %.3f on %d held-out items (%d held-out groups)",
             t["discriminator"], acc["train"]["accuracy"], acc["train"]["n"], acc["held_out"]["accuracy"],
             acc["held_out"]["n"], len(meta["split"]["held_out_groups"]))
    return out


def momentum_sequences(pair, prompts: list[str], texts: list[str], t: float, clamp, cfg, max_length: int):
    """Per item the contrastive momentum m_t = log p_e − log p_a of its text given its prompt."""
    from cscore.scorers.kinds.shared import stats_cache
    from cscore.scorers.methods import cdm
    from cscore.scorers.methods.common import per_item

    stats = pair.statistics(prompts, texts, temperatures=[t], max_length=max_length,
                            token_budget=cfg.runtime.token_budget, padding_side=cfg.runtime.padding_side,
                            models=["expert", "amateur"], cache=stats_cache(cfg),
                            prefix_sharing=cfg.runtime.get("prefix_sharing", True))
    m = cdm.momentum(stats.stats, t, clamp)
    return per_item(m, next(iter(stats.stats.values())).offsets), stats


def train_pooler_discriminator(cfg, t: dict, items, labels, train_mask):
    from cscore.scorers.kinds.shared import load_pair
    from cscore.scorers import cdm_pooler

    pair = load_pair(cfg, ["expert", "amateur"])
    # the prompts were cut to fit runtime.max_length when the negatives were made: no second cut
    seqs, _ = momentum_sequences(pair, [i["prompt"] for i in items], [i["text"] for i in items], t["t"], t["clamp"],
                                 cfg, max_length=1 << 30)
    x = cdm_pooler.features(seqs)
    pooler = cdm_pooler.fit(x[train_mask], labels[train_mask], l2=t["l2"], where="cdm train")
    record = {"pooler": pooler.to_dict(), "momentum": {"t": t["t"], "clamp": t["clamp"], "skip_first": False},
              "pair": pair_record(cfg), "models": {r: m.name for r, m in pair.models.items()}}
    return record, pooler.decision(x)


def train_classifier(cfg, t: dict, items, labels, train_mask, out: Path):
    """Fine-tune a 2-class sequence classifier (AdamW, cross-entropy) on the train groups."""
    import torch

    from cscore.scorers.models import auto_device

    torch.manual_seed(t["seed"])
    tok, model = load_classifier(t["discriminator"], auto_device(cfg.runtime.device))
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
    model.eval()
    log_odds = classifier_log_odds(tok, model, prompts, texts, text=t["text"], batch_size=t["batch_size"],
                                   max_length=t["max_length"])
    model.save_pretrained(out)
    tok.save_pretrained(out)
    record = {"classifier": {"base": t["discriminator"], "class": type(model).__name__, "text": t["text"],
                             "max_length": t["max_length"], "epochs": t["epochs"], "lr": t["lr"],
                             "batch_size": t["batch_size"], "train_loss": losses}}
    return record, log_odds
