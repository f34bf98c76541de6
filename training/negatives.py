"""``cscore cdm generate``: negatives of positives made by the degraded amateur, appended to negatives.jsonl
one positive at a time, provenance.json written last; the same config in the same directory resumes."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from cscore.config.run import Pair, RunConfig
from cscore.errors import ConfigError
from cscore.files import write_atomic
from cscore.training.artifacts import ArtifactDir, now, versions

log = logging.getLogger(__name__)

NEGATIVES = "negatives.jsonl"
PROVENANCE = "provenance.json"


def pair_record(p: Pair) -> dict:
    """The pair a job ran with, from its typed ``pair`` section."""
    return {"name": p.name, "expert": p.expert.path, "amateur": p.amateur.path, "early_exit": p.amateur.early_exit,
            "revision": p.expert.revision, "amateur_revision": p.amateur.revision}


def select_positives(examples, which: str, column: str | None = None):
    """The rows whose text is a positive, with a ``text`` column: every hypothesis, each group's reference
    once, or each group's row with the highest ``column`` (top_rated)."""
    table = examples.copy()
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
    if which == "top_rated":
        table = table[np.isfinite(table[column].to_numpy(dtype=float))]
        table = table.loc[table.groupby("group", sort=False)[column].idxmax().to_numpy()].copy()
    table["text"] = table["hypothesis"]
    return table.reset_index(drop=True)


def round_robin(positives, limit: int | None):
    """At most ``limit`` positives: the first of every group, then the second, ...; None: all of them."""
    if limit is None:
        return positives
    rank = positives.groupby("group", sort=False, dropna=False).cumcount().to_numpy()
    first = positives["group"].map({g: i for i, g in enumerate(positives["group"].unique())}).to_numpy()
    order = np.lexsort((first, rank))  # by rank within the group, then by the group's first row
    return positives.iloc[order[:limit]].reset_index(drop=True)


def read_records(path) -> list[dict]:
    """The records of a negatives.jsonl: its complete lines (text after the last line break is ignored)."""
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


def finished_records(path, per_positive: int) -> list[dict]:
    """The records of the positives with all ``per_positive`` negatives written (the file keeps only them)."""
    records = read_records(path)
    n = Counter(r["source_id"] for r in records)
    keep = [r for r in records if n[r["source_id"]] == per_positive]
    if path.exists() and (len(keep) < len(records) or not path.read_bytes().endswith(b"\n") and path.stat().st_size):
        write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep))
    return keep


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


@dataclass
class GenerateJob:
    """One ``cdm generate`` into one directory: its settings and provenance (its identity in it)."""
    folder: ArtifactDir
    g: dict
    prov: dict  # the provenance so far (the earlier one, or a new one)
    config: dict  # the whole config as composed (interpolations resolved): what provenance.json records

    @property
    def negatives(self):
        return self.folder.path / NEGATIVES


def open_job(run: RunConfig, g: dict, out, config: dict) -> GenerateJob:
    """The directory's job; refuses a directory of another config or one that is not cscore's."""
    runtime = config["runtime"]  # what decides the negatives:
    identity = {"data": config["data"], "split": config["split"], "pair": pair_record(run.pair),
                "prompt": config["prompt"], "max_length": runtime["max_length"], "dtype": runtime["dtype"],
                "generate": {k: v for k, v in g.items() if k not in ("out", "limit")}}
    folder = ArtifactDir(out, PROVENANCE)

    def refuse(old: dict) -> str:
        changed = sorted(k for k in identity if old.get(k) != identity[k])
        return (f"{out} holds negatives of another config (it differs in {', '.join(changed)}); "
                "give another cdm.generate.out or remove that directory")

    previous = folder.check(identity, refuse)
    job = GenerateJob(folder, g, previous or {"identity": identity, "created": now()}, config)
    if previous is None and job.negatives.exists():
        raise ConfigError(f"{out} has a {NEGATIVES} but no {PROVENANCE}: not a cscore cdm generate directory")
    return job


def todo(job: GenerateJob, positives):
    """The positives whose negatives are not written yet; creates the directory."""
    done = {r["source_id"] for r in finished_records(job.negatives, job.g["n_negatives"])}
    rest = positives[~positives["id"].astype(str).isin(done)].reset_index(drop=True)
    log.info("cdm generate: %d positives (%s), %d done earlier, %d to do -> %s", len(positives), job.g["positives"],
             len(positives) - len(rest), len(rest), job.folder.path)
    job.folder.path.mkdir(parents=True, exist_ok=True)
    return rest


def record_lines(row, item, made: list[dict], g: dict) -> str:
    """The JSONL lines of one positive's negatives."""
    return "".join(json.dumps({
        "id": f"{row.id}#neg{r['index']}", "source_id": str(row.id), "group": str(row.group),
        "system": str(row.system), "prompt": item.prompt, "prompt_truncated": item.truncated,
        "positive": row.text, "negative": r["negative"], "spans": r["spans"],
        "strategy": g["strategy"], "gamma": g["gamma"], "seed": g["seed"],
        "tries": sum(s["tries"] for s in r["spans"]), "identical": r["identical"],
        "dropped": r["dropped"], "segments": r["segments"], "segments_asked": r["segments_asked"],
    }, ensure_ascii=False) + "\n" for r in made)


def write_negatives(job: GenerateJob, run: RunConfig, pair, rows, inputs, path=None) -> dict:
    """Append the negatives of ``rows`` to ``path`` (default negatives.jsonl); returns the models record."""
    from cscore.scorers.cdm import generate as cg
    from cscore.scorers.models.identity import model_identity

    g = job.g
    models = {role: {"spec": m.name, "identity": model_identity(m), "class": m.info.get("class")}
              for role, m in pair.models.items()}
    s = cg.Settings(strategy=g["strategy"], max_span=g["max_span"], n_negatives=g["n_negatives"],
                    n_segments=g["n_segments"], seed=g["seed"], max_tries=g["max_tries"],
                    on_identical=g["on_identical"], fill_tokens=g["fill_tokens"],
                    sampling=cg.Sampling(g["gamma"], g["temperature"], g["top_k"], g["top_p"]))
    sampler = cg.DegradedSampler(pair, s.sampling)
    job.folder.finish({**job.prov, "complete": False, "config": job.config,
                       "models": models, "versions": versions()})
    start, every = time.perf_counter(), max(1, len(rows) // 10)
    with open(job.negatives if path is None else path, "a", encoding="utf-8") as f:
        for i, row in enumerate(rows.itertuples(index=False)):
            item = inputs.items[i]
            made = cg.make_negatives(sampler, str(row.id), item.prompt, row.text, s)
            # all negatives of a positive in one write: resume skips whole positives
            f.write(record_lines(row, item, made, g))
            f.flush()
            if run.runtime.progress and ((i + 1) % every == 0 or i + 1 == len(rows)):
                log.info("  %d/%d positives (%.1fs)", i + 1, len(rows), time.perf_counter() - start)
    return models


def finish(job: GenerateJob, run: RunConfig, n_positives: int, models: dict | None) -> dict:
    """provenance.json with ``complete: true`` and the counts (written last); returns the counts."""
    prov = job.prov
    c = counts(read_records(job.negatives))
    job.folder.finish({**prov, "complete": True, "config": job.config,
                       "models": models if models is not None else prov.get("models"), "versions": versions(),
                       "positives_selected": n_positives, "counts": c, "updated": now()})
    log.info("cdm generate: %d negatives of %d positives (%d identical to their positive: %d kept and flagged, "
             "%d dropped; %d segment fills equal to the removed text after %d draws; %d negatives with fewer "
             "segments than asked)", c["negatives_written"], c["positives"],
             c["identical_kept"] + c["identical_dropped"], c["identical_kept"], c["identical_dropped"],
             c["identical_fills"], job.g["max_tries"], c["fewer_segments"])
    return c
