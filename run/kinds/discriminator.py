"""The discriminator kind (``kind = "discriminator"``: cdm_gen): a discriminator trained by ``cscore cdm train``
scores each item it was not trained on; the comparison rows are a token method's."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.errors import ConfigError
from cscore.progress import Progress
from cscore.run.kinds.base import REGISTRY, Loaded, Plan, RunState, Scored
from cscore.run.kinds.token_pass import TokenKind
from cscore.scorers.store.runner import InProcess, Pending
from cscore.training import held_out
from cscore.training.classifier import classifier_log_odds, load_classifier
from cscore.training.discriminator import pooler_from_dict
from cscore.training.negatives import pair_record

log = logging.getLogger(__name__)


@REGISTRY
class Discriminator(TokenKind):
    name = "discriminator"
    sections = ("discriminator",)

    def plan(self, run: RunConfig) -> Plan:
        """The token plan and a pooler's momentum temperature; a pooler trained on another pair is refused."""
        from cscore.scorers.methods import cdm_gen

        plan = super().plan(run)
        meta = cdm_gen.read_meta(plan.variants[-1].params.discriminator)
        if meta["kind"] == "pooler":
            want, have = meta["pair"], pair_record(run.pair)
            keys = {"expert": "pair.expert.path", "amateur": "pair.amateur.path",
                    "early_exit": "pair.amateur.early_exit"}
            diff = [name for k, name in keys.items() if str(want.get(k)) != str(have.get(k))]
            if diff:
                raise ConfigError(f"the discriminator's pooler reads the momentum of the pair it was trained with "
                                  f"(expert {want['expert']}, amateur {want['amateur']}, "
                                  f"early_exit {want['early_exit']}); "
                                  f"this run's pair differs in {', '.join(diff)}")
            plan.temperatures = sorted(set(plan.temperatures) | {float(meta["momentum"]["t"])})
        return plan

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
              state: RunState, coordinator: InProcess) -> Scored | Pending:
        """The comparison rows as for any method (``TokenKind.score``), then score.cdm_gen from the discriminator."""
        from cscore.scorers.methods import cdm, cdm_gen
        from cscore.scorers.methods.common import per_item

        main = plan.variants[-1]
        p = main.params  # cdm_gen's Params
        path = p.discriminator
        meta = cdm_gen.read_meta(path)
        loaded, excluded = held_out_rows(main.name, meta, loaded)
        got = self.token_pass(run, loaded, plan, progress, state, coordinator)
        if isinstance(got, Pending):
            return got
        scored, pair_stats = got
        table = scored.table
        if meta["kind"] == "pooler":
            m = meta["momentum"]
            stats = pair_stats.stats
            seqs = per_item(cdm.momentum(stats, m["t"], m["clamp"]), next(iter(stats.values())).offsets,
                            bool(m.get("skip_first", False)))
            log_odds = pooler_from_dict(meta["pooler"]).score(seqs)
        else:
            c = meta["classifier"]
            tok, model = load_classifier(str(path), run.passes.torch_device())
            log_odds = classifier_log_odds(tok, model, list(table["prompt"]), list(table["hypothesis"]), text=c["text"],
                                           batch_size=p.batch_size, max_length=c["max_length"])
        values = log_odds if p.output == "log_odds" else 1.0 / (1.0 + np.exp(-log_odds))
        table[f"{rundir.SCORE}{main.name}"] = values
        scored.metrics["discriminator"] = {"path": str(Path(path).resolve()), "kind": meta["kind"],
                                           "output": p.output, "accuracy": meta.get("accuracy"),
                                           "trained_on": meta.get("input"), "excluded_trained_rows": excluded,
                                           "generate_counts": meta.get("generate_counts")}
        log.info("%s: %s discriminator from %s (held-out accuracy %s)", main.name, meta["kind"], path,
                 (meta.get("accuracy") or {}).get("held_out", {}).get("accuracy"))
        return scored


def held_out_rows(name: str, meta: dict, loaded: Loaded) -> tuple[Loaded, int | None]:
    """(the rows to score, how many the discriminator was trained on and were left out; None: no record of
    them); a ConfigError where it was trained on all of them."""
    record = meta.get(held_out.KEY)
    if record is None:
        log.warning("%s: the discriminator has no record of the rows it was trained on (trained by an older "
                    "cscore): none excluded from scoring; train it again to exclude them", name)
        return loaded, None
    trained = held_out.trained_mask(record, loaded.examples)
    n = int(trained.sum())
    if n and n == len(trained):
        raise ConfigError(f"{name}: all {n} rows of this data are rows the {meta['kind']} was trained on: nothing "
                          "held out to score; score other data or another split")
    if n:
        rows, are = ("rows", "are") if n > 1 else ("row", "is")
        log.warning("%s: %d %s the %s was trained on %s excluded from scoring", name, n, rows, meta["kind"], are)
    return replace(loaded, examples=loaded.examples[~trained].reset_index(drop=True)), n
