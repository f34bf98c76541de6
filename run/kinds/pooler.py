"""The trained pooler kind (``kind = "pooler"``: cdm_classifier): the token pass, then each item's momentum pooled
by a linear model cross-validated over ``group`` (``cscore.scorers.cdm.pooler``); the folds go to cdm_folds.json."""

from __future__ import annotations

import json
import logging

import numpy as np

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.progress import Progress
from cscore.run.kinds.aspects import target_aspect
from cscore.run.kinds.base import REGISTRY, Loaded, Plan, RunState, Scored
from cscore.run.kinds.token_pass import TokenKind
from cscore.scorers.store.runner import InProcess, Pending

log = logging.getLogger(__name__)


@REGISTRY
class Pooler(TokenKind):
    name = "pooler"
    sections = ("pooler",)

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
              state: RunState, coordinator: InProcess) -> Scored | Pending:
        from cscore.scorers import methods
        from cscore.scorers.cdm import pooler as cdm_pooler
        from cscore.scorers.methods.common import per_item

        main = plan.variants[-1]
        p = main.params  # cdm_classifier's Params
        aspect = target_aspect(loaded.examples, p.aspect)  # these checks before any model is loaded
        groups = loaded.examples["group"].astype(str).to_numpy()
        cdm_pooler.check_folds(loaded.examples[f"{rundir.HUMAN}{aspect}"].to_numpy(dtype=np.float64), groups,
                               folds=p.folds, seed=p.seed, objective=p.objective, l2=p.l2, threshold=p.threshold)
        # the comparison rows; the pooler's column below
        got = self.token_pass(run, loaded, plan, progress, state, coordinator)
        if isinstance(got, Pending):
            return got
        scored, pair_stats = got
        stats = pair_stats.stats
        momentum = methods.get(main.method).token_scores(stats, p)
        offsets = next(iter(stats.values())).offsets
        sequences = per_item(momentum, offsets, bool(p.skip_first))
        table = scored.table
        labels = table[f"{rundir.HUMAN}{aspect}"].to_numpy(dtype=np.float64)
        cv = cdm_pooler.cross_validate(sequences, labels, groups, folds=p.folds, seed=p.seed,
                                       objective=p.objective, l2=p.l2, threshold=p.threshold)
        table[f"{rundir.SCORE}{main.name}"] = cv.scores
        folds = [{**fold.summary(), "test_ids": table["id"].iloc[fold.test].astype(str).tolist(),
                  "n_test_labelled": int(np.isfinite(labels[fold.test]).sum())} for fold in cv.folds]
        record = {"method": main.method, "variant": main.name, "aspect": aspect, "k": p.folds, "seed": p.seed,
                  "objective": p.objective, "l2": p.l2, "threshold": p.threshold,
                  "features": list(cdm_pooler.FEATURES), "group_column": "group",
                  "fold_assignment": "groups ranked by sha256(seed, group), cut into k runs", "folds": folds}
        scored.kept["pooler"] = {"record": record, "scores": cv.scores, "labels": labels,
                                 "tests": [f.test for f in cv.folds], "groups": len(set(table["group"].astype(str)))}
        return scored

    def evaluate(self, scored: Scored, correlate) -> None:
        """Each fold's correlations on its held-out items, then cdm_folds.json and the ``pooler`` section."""
        kept = scored.kept.pop("pooler")
        record, scores, labels = kept["record"], kept["scores"], kept["labels"]
        folds = record["folds"]
        for entry, test in zip(folds, kept["tests"]):
            for kind in ("spearman", "pearson"):
                entry[kind] = correlate(scores[test], labels[test], kind)
        scored.files[rundir.CDM_FOLDS] = json.dumps(record, indent=1, default=float, allow_nan=True) + "\n"
        per_fold = {kind: [f[kind] for f in folds] for kind in ("spearman", "pearson")}
        scored.metrics["pooler"] = {"file": rundir.CDM_FOLDS, "aspect": record["aspect"], "k": record["k"],
                                    "seed": record["seed"], "objective": record["objective"], "per_fold": per_fold,
                                    "n_test": [f["n_test"] for f in folds]}
        log.info("%s: %d-fold cross-validation over %d groups on human.%s (seed %d); per-fold Spearman %s",
                 record["variant"], record["k"], kept["groups"], record["aspect"], record["seed"],
                 ", ".join(f"{v:.3f}" for v in per_fold["spearman"]))
