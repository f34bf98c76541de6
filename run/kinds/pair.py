"""What a kind runs on: the model pair (pooled per process, weights on first use) and the statistics cache."""

from __future__ import annotations

from cscore.config.run import ModelSpec, RunConfig


def load_pair(run: RunConfig, needed: list[str]):
    from cscore.scorers.api import ModelPair

    p = run.pair
    assert p.expert.path is not None  # typed() refuses a pair without an expert
    ama = p.amateur if "amateur" in needed else ModelSpec()  # no amateur: a pair of the expert alone
    # pooled: the jobs of an in-process multirun share the models, whose weights load on first use
    pair = ModelPair.pooled(p.expert.path, ama.path, amateur_early_exit=ama.early_exit, revision=p.expert.revision,
                            amateur_revision=ama.revision, options=run.passes)
    if pair.aligned:  # a cross-family pair: only the methods computed on aligned units
        from cscore.scorers.methods import check_aligned

        check_aligned(run.method.name, vars(run.method))  # `cscore cdm`: config.yaml's method (token momenta)
    return pair


def model_line(role: str, m) -> str:
    """What a model is and how this job has it (loaded, reused from an earlier job, or pending)."""
    info = m.info
    what = info.get("spec") or info.get("path")
    exit_ = f", early exit after {info['early_exit']} of its layers" if info.get("early_exit") else ""
    root = m.parent or m
    if not root.loaded:
        how = "weights load when first needed"
    elif root.reused:
        how = "in memory from an earlier job of this process"
    else:
        how = f"loaded in {root.load_seconds:.1f}s"
    return f"{role}: {what} ({info.get('class', '?')}, {info.get('layers')} layers{exit_}; {how})"


def stats_cache(run: RunConfig):
    """The statistics cache of this run (None when cache.enabled=false)."""
    from cscore.scorers.store.cache import StatsCache

    if not run.cache.enabled:
        return None
    about = {"data": run.data.name, "split": run.split.use, "method": run.method.name}
    return StatsCache(run.cache.dir, run.cache.checkpoint_seconds, about=about)
