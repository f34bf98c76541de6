"""Reliability figures: kill `cscore run` and a multirun at chosen moments, resume, and check that
nothing finished is lost or recomputed, nothing half-written is read as complete, and the final
scores equal an uninterrupted run's; the same for SIGINT, a full disk (a small tmpfs), a read-only
statistics cache, two sweeps sharing one cache and one sweep directory, sharded passes
(``scripts/reliability_shards.py``: one shard killed, one partial damaged, two sharded runs at
once), and the fuzzers. A run killed inside its forward pass must resume from the pass's
checkpoint (every batch is flushed: cache.checkpoint_seconds=0).

    python scripts/reliability.py --kills 4 --seed 0 --fuzz-examples 2000
    python scripts/reliability.py --quick      # one of each kind of moment, no mounts: for CI
    python scripts/reliability.py --only shards     # the sharded-pass cases alone (no fuzzing)
    python scripts/reliability.py --quick --only cache_write,fuzz --fuzz-examples 5   # a subset

Everything runs offline on a tiny random Llama built here (saved to a temp dir) and a generated
table of 200 rows; each `cscore run` takes a few seconds. The tmpfs and read-only bind mounts need
root (skipped otherwise, or with --no-mount) and are always unmounted again. Prints one table
(markdown) and writes the details to --json."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from reliability_checks import Job, Tally, entry_states, same_scores, score_frame

from cscore import rundir
from cscore.scorers.store.cache import StatsCache

WORDS = ("the council river bridge vaccine patients team match goal library storm mayor city night rain "
         "report police money bank school children road power water price market").split()
RUN_MOMENTS = ("forward", "checkpoint", "cache_write", "scores_write", "report", "random")
SWEEP_MOMENTS = ("forward", "cache_write", "between_jobs", "random")
SWEEP = ["method.gamma=0.1,0.5", "pair.amateur.early_exit=1,2"]  # 4 jobs, 2 forward passes


# ---------------------------------------------------------------------------------------------
# assets: a tiny model and a table, built here


def build_model(folder: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from cscore.tests.support.models import train_bpe

    rng = random.Random(7)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(200)]
    tok = train_bpe(corpus, 300)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=96, intermediate_size=192, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id,
                         eos_token_id=fast.eos_token_id)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_table(file: Path, n: int) -> Path:
    rng = random.Random(11)
    rows = [{"id": f"item{i:03d}", "source": " ".join(rng.choice(WORDS) for _ in range(60)).capitalize() + ".",
             "hypothesis": " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + ".",
             "q": rng.randint(1, 5)} for i in range(n)]
    pd.DataFrame(rows).to_csv(file, index=False)
    return file


# ---------------------------------------------------------------------------------------------
# one command, watched


def has(folder: Path, test) -> int:
    try:
        return sum(1 for p in os.scandir(folder) if test(p.name))
    except OSError:
        return 0


def count_files(root: Path, name: str) -> int:
    return sum(1 for _ in root.rglob(name)) if root.is_dir() else 0


def run_and_kill(args, cwd, trigger, sig, rng) -> tuple[Job, float | None]:
    """Start the command, send ``sig`` once ``trigger(job)`` returns a delay (then after it); the
    job and the time of the signal (None when the job ended first)."""
    job = Job(args, cwd)
    while job.proc.poll() is None:
        delay = trigger(job)
        if delay is not None:
            time.sleep(delay)
            if job.proc.poll() is None:
                job.proc.send_signal(sig)
                at = time.perf_counter() - job.start
                job.wait()
                return job, at
            break
        time.sleep(0.001)
    job.wait()
    return job, None


# ---------------------------------------------------------------------------------------------
# checks


def job_dirs(sweep: Path, n: int) -> list[Path]:
    return [sweep / str(i) for i in range(n)]


def complete_dirs(dirs, refs) -> tuple[dict[Path, bytes], int]:
    """Run dirs read as complete (-> their metrics.json bytes), and how many of those hold scores
    other than the uninterrupted run's (a finding)."""
    done, wrong = {}, 0
    for d, ref in zip(dirs, refs):
        if rundir.is_complete(d):
            done[d] = (d / rundir.METRICS).read_bytes()
            try:
                wrong += not same_scores(score_frame(d), ref)
            except Exception:
                wrong += 1
    return done, wrong


def checkpoint_files(cache_dir: Path) -> int:
    return len(list(cache_dir.glob(".partial/*/*.npz")))


RESUMED = re.compile(r"resumed (\d+) of (\d+) items from a checkpoint")


def resume_and_check(tally: Tally, args, cwd, dirs, refs, cache_dir, passes_needed) -> None:
    """After an interruption: record what is finished, resume, and check nothing finished was lost
    or recomputed (a pass's checkpoint included) and every final score equals the uninterrupted run's."""
    entries, bad = entry_states(cache_dir)
    done, wrong = complete_dirs(dirs, refs)
    tally.bad_read += bad + wrong
    kept = checkpoint_files(cache_dir)
    job = Job(args, cwd)
    rc = job.wait()
    if rc != 0:
        tally.add(f"resume exited {rc}: {job.output[-300:]}")
        return
    resumed = [int(m.group(1)) for m in RESUMED.finditer(job.output)]
    tally.resumed += sum(resumed)
    if kept and not any(resumed):
        tally.lost += 1  # a checkpoint was there, the pass started over
        tally.add(f"{kept} checkpoint files left by the interrupted run, nothing resumed from them")
    after, bad_after = entry_states(cache_dir)
    tally.bad_read += bad_after
    tally.lost += len(entries - after)
    computed = job.seen(" items in ")  # "scored N items in": a forward pass (a hit says "read from the cache")
    # a pass is recomputed when its entry was there before; passes_needed(entries) = those missing
    tally.recomputed += max(0, computed - passes_needed(entries))
    for d, metrics in done.items():
        if not (d / rundir.METRICS).is_file() or (d / rundir.METRICS).read_bytes() != metrics:
            tally.recomputed += 1  # a finished run done again (or lost)
    for d, ref in zip(dirs, refs):
        if not rundir.is_complete(d) or not same_scores(score_frame(d), ref):
            tally.unequal += 1
            tally.add(f"{d.name}: final scores differ from the uninterrupted run")


def state_of(cache_dir: Path, dirs) -> str:
    entries = len(StatsCache(cache_dir).keys())
    tmp = has(cache_dir, lambda n: n.startswith(".tmp-"))
    done = sum(rundir.is_complete(d) for d in dirs)
    scores = sum((d / rundir.SCORES).is_file() for d in dirs)
    ckpt = f", checkpoint {checkpoint_files(cache_dir)}" if checkpoint_files(cache_dir) else ""
    return f"entries {entries}{'+tmp' if tmp else ''}{ckpt}, scores {scores}, complete {done}/{len(dirs)}"


# ---------------------------------------------------------------------------------------------
# the cases


class Bench:
    def __init__(self, work: Path, seed: int, rows: int = 200):
        self.work, self.rng = work, random.Random(seed)
        self.model = build_model(work / "model")
        self.data = build_table(work / "table.csv", rows)
        self.n = 0

    def base(self) -> list[str]:
        return [f"pair.expert.path={self.model}", "pair.amateur.path=null", "pair.amateur.early_exit=2",
                "pair.name=tiny", "runtime.progress=false", "runtime.token_budget=1024", "data=table",
                f"data.path={self.data}", "data.task=summarization", "data.columns.human=[q]",
                "cache.checkpoint_seconds=0"]

    def fresh(self, name: str) -> Path:
        self.n += 1
        d = self.work / f"{name}-{self.n}"
        d.mkdir()
        return d

    def single(self, d: Path, cache: Path) -> list[str]:
        return ["run", *self.base(), f"hydra.run.dir={d / 'run'}", f"cache.dir={cache}"]

    def multi(self, d: Path, cache: Path) -> list[str]:
        return ["run", "-m", *self.base(), *SWEEP, f"hydra.sweep.dir={d / 'sweep'}", f"cache.dir={cache}"]

    def reference(self):
        """Uninterrupted runs: the scores to compare with, and when things happen."""
        d = self.fresh("reference")
        job = Job(self.single(d, d / "cache"), d)
        t_tmp = t_weights = None
        while job.proc.poll() is None:
            now = time.perf_counter() - job.start
            if t_weights is None and job.seen("weights loaded in"):
                t_weights = now
            if t_tmp is None and has(d / "cache", lambda n: n.startswith(".tmp-")):
                t_tmp = now
            time.sleep(0.001)
        assert job.wait() == 0, job.output[-2000:]
        self.run_total = time.perf_counter() - job.start
        self.forward = (t_tmp or self.run_total) - (t_weights or 0)
        self.run_ref = score_frame(d / "run")
        m = self.fresh("reference-multi")
        job = Job(self.multi(m, m / "cache"), m)
        assert job.wait() == 0, job.output[-2000:]
        self.multi_total = time.perf_counter() - job.start
        self.n_jobs = len([p for p in (m / "sweep").iterdir() if p.name.isdigit()])
        self.multi_refs = [score_frame(p) for p in job_dirs(m / "sweep", self.n_jobs)]
        self.multi_passes = len(StatsCache(m / "cache").keys())
        return {"run_seconds": round(self.run_total, 1), "forward_seconds": round(self.forward, 1),
                "multirun_seconds": round(self.multi_total, 1), "multirun_jobs": self.n_jobs,
                "multirun_passes": self.multi_passes}

    # -- triggers: return a delay once the moment has come, else None

    def trigger(self, moment: str, d: Path, cache: Path, multi: bool):
        rng = self.rng
        k = rng.randint(1, self.multi_passes) if multi else 1
        k_job = rng.randint(1, self.n_jobs - 1) if multi else 1
        total = self.multi_total if multi else self.run_total
        at = rng.uniform(0.05, 1.0) * total
        k_ckpt = rng.randint(1, 4)
        fwd = rng.uniform(0.0, 0.9) * self.forward
        seen = {"tmp": 0, "was": False}

        def fire(job: Job):
            if moment == "random":
                return 0.0 if time.perf_counter() - job.start >= at else None
            if moment == "forward":
                return fwd if job.seen("weights loaded in") else None
            if moment == "checkpoint":  # inside the pass, once k batches are kept
                return rng.uniform(0.0, 0.02) if checkpoint_files(cache) >= k_ckpt else None
            if moment == "cache_write":
                now = has(cache, lambda n: n.startswith(".tmp-")) > 0
                if now and not seen["was"]:
                    seen["tmp"] += 1
                seen["was"] = now
                return 0.0 if now and seen["tmp"] >= k else None
            if moment == "scores_write":
                run = d / "run"
                return 0.0 if has(run, lambda n: n.startswith(".scores.parquet") or n == rundir.SCORES) else None
            if moment == "report":
                return rng.uniform(0.0, 0.3) if (d / "run" / rundir.METRICS).exists() else None
            if moment == "between_jobs":
                return 0.0 if count_files(d / "sweep", rundir.METRICS) >= k_job else None
            raise ValueError(moment)
        return fire

    def interrupt(self, tally: Tally, moment: str, sig, multi: bool):
        d = self.fresh(f"{'multi' if multi else 'run'}-{moment}")
        cache = d / "cache"
        args = self.multi(d, cache) if multi else self.single(d, cache)
        dirs = job_dirs(d / "sweep", self.n_jobs) if multi else [d / "run"]
        refs = self.multi_refs if multi else [self.run_ref]
        job, at = run_and_kill(args, d, self.trigger(moment, d, cache, multi), sig, self.rng)
        tally.iterations += 1
        if at is None:
            tally.states["finished before the signal"] += 1
        else:
            tally.signals += 1
            tally.states[state_of(cache, dirs)] += 1
            if sig == signal.SIGINT:
                rc, out = job.proc.returncode, job.output
                if "Traceback" in out:
                    tally.add(f"SIGINT at {at:.2f}s ({moment}) gave a traceback: {out[out.find('Traceback'):][:400]}")
                elif rc not in (130, 0):
                    tally.add(f"SIGINT at {at:.2f}s ({moment}) exited {rc}")
        needed = self.multi_passes if multi else 1
        resume_and_check(tally, args, d, dirs, refs, cache, lambda entries: needed - len(entries))
        shutil.rmtree(d, ignore_errors=True)

    def concurrent(self, tally: Tally):
        """Two identical sweeps at once on one cache and one sweep dir (two SLURM submissions)."""
        d = self.fresh("concurrent")
        cache = d / "cache"
        args = self.multi(d, cache)
        jobs = [Job(args, d)]
        time.sleep(self.rng.uniform(0.0, 2.0))
        jobs.append(Job(args, d))
        rcs = [j.wait() for j in jobs]
        tally.iterations += 1
        if rcs != [0, 0]:
            tally.add(f"exit codes {rcs}: {jobs[0].output[-300:]} | {jobs[1].output[-300:]}")
        computed = sum(j.seen(" items in ") for j in jobs)
        tally.recomputed += max(0, computed - self.multi_passes)
        tally.states[f"passes computed {computed} of {self.multi_passes} entries"] += 1
        _, bad = entry_states(cache)
        tally.bad_read += bad
        for p, ref in zip(job_dirs(d / "sweep", self.n_jobs), self.multi_refs):
            if not rundir.is_complete(p) or not same_scores(score_frame(p), ref):
                tally.unequal += 1
                tally.add(f"job {p.name}: incomplete or other scores")
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# storage faults (root: tmpfs and read-only bind mounts)


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=False, capture_output=True)


def full_disk(bench: Bench, tally: Tally, where: str, size: str):
    """The cache (``where="cache"``) or the run dir (``"run"``) on a tmpfs too small for what it gets;
    then room again (the tmpfs remounted larger) and a resume."""
    d = bench.fresh(f"full-{where}")
    mnt = d / "tmpfs"
    mnt.mkdir()
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt))
    try:
        cache = mnt / "cache" if where == "cache" else d / "cache"
        run = mnt / "run" if where == "run" else d / "run"
        args = ["run", *bench.base(), f"hydra.run.dir={run}", f"cache.dir={cache}"]
        job = Job(args, d)
        rc = job.wait()
        tally.iterations += 1
        out = job.output
        if "Traceback" in out:
            tally.add(f"full {where}: traceback {out[out.find('Traceback'):][:300]}")
        last = out.strip().splitlines()[-1] if out.strip() else ""
        note = ": one-line error" if last.startswith("cscore: error:") else ""
        note += ", cache warning, nothing stored" if "cannot store entry" in out else ""
        tally.states[f"exit {rc}{note}"] += 1
        _, bad = entry_states(cache)
        tally.bad_read += bad
        if rc != 0 and rundir.is_complete(run):
            tally.bad_read += 1
        if rc == 0 and not same_scores(score_frame(run), bench.run_ref):
            tally.unequal += 1
        mount("-o", "remount,size=64m", str(mnt))
        job = Job(args, d)
        if job.wait() != 0 or not same_scores(score_frame(run), bench.run_ref):
            tally.unequal += 1
            tally.add(f"full {where}: resume with room failed or differs: {job.output[-300:]}")
    finally:
        umount(mnt)
        shutil.rmtree(d, ignore_errors=True)


def read_only_cache(bench: Bench, tally: Tally, populated: bool):
    d = bench.fresh("readonly")
    src, ro = d / "cache", d / "ro"
    src.mkdir()
    ro.mkdir()
    if populated:
        assert Job(bench.single(d, src), d).wait() == 0
        shutil.rmtree(d / "run")
    before = sorted(p.name for p in src.iterdir())
    mount("--bind", str(src), str(ro))
    try:
        mount("-o", "remount,ro,bind", str(ro))
        job = Job(["run", *bench.base(), f"hydra.run.dir={d / 'run'}", f"cache.dir={ro}"], d)
        rc = job.wait()
        tally.iterations += 1
        from_cache = job.seen("read from the cache") > 0
        tally.states[f"exit {rc}, {'read from the cache' if from_cache else 'computed, not stored'}"] += 1
        if rc != 0 or "Traceback" in job.output:
            tally.add(f"read-only cache ({'populated' if populated else 'empty'}): exit {rc}: {job.output[-300:]}")
        elif not same_scores(score_frame(d / "run"), bench.run_ref):
            tally.unequal += 1
        if populated and not from_cache:
            tally.recomputed += 1
    finally:
        umount(ro)
    if sorted(p.name for p in src.iterdir()) != before:
        tally.add("the read-only cache changed")
    shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------


def fuzz_rows(examples: int, seed: int) -> list[dict]:
    import importlib.util
    import logging

    spec = importlib.util.spec_from_file_location("cscore_fuzz", Path(__file__).with_name("fuzz.py"))
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    logging.disable(logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in fuzz.seed_files():
            rows.append(fuzz.run_target(name, examples, seed, Path(tmp)))
        rows.append(fuzz.run_parsers(examples, seed))
    logging.disable(logging.NOTSET)
    return rows


def table(rows: list[dict], fuzz: list[dict], seed: int, fuzz_examples: int) -> str:
    out = ["| case | iterations | signals | states when interrupted / outcome | items resumed | lost | recomputed | "
           "corrupt read as complete | final ≠ uninterrupted | findings |",
           "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        states = "; ".join(f"{k} ×{v}" for k, v in sorted(r["states"].items()))
        out.append(f"| {r['case']} | {r['iterations']} | {r['signals']} | {states} | {r['items_resumed']} | "
                   f"{r['lost']} | {r['recomputed']} | {r['corrupt_read_as_complete']} | {r['final_differs']} | "
                   f"{len(r['findings'])} |")
    if fuzz:
        n = sum(f["examples"] for f in fuzz)
        ok = sum(f["ok"] for f in fuzz)
        err = sum(f["error"] for f in fuzz)
        found = sum(f["finding"] for f in fuzz)
        out.append(f"| fuzz: {len(fuzz) - 1} loader formats + judge parsers (hypothesis, seed {seed}, "
                   f"{fuzz_examples} inputs each) | {n} | – | {ok} loaded, {err} one-line errors |"
                   f"{' – |' * 5} {found} |")
    return "\n".join(out)


QUICK = {"run_moments": ("checkpoint", "cache_write"), "sweep_moments": ("between_jobs",),
         "sigint_run": ("forward", "random"), "sigint_sweep": (), "kills": 1, "sigints": 1, "concurrent": 0,
         "shard_faults": 1, "fuzz_examples": 100, "rows": 100}


def plan(args, bench: Bench) -> list[tuple]:
    """The cases to run: (name, function, iterations, arguments)."""
    q = QUICK if args.quick else {"run_moments": RUN_MOMENTS, "sweep_moments": SWEEP_MOMENTS,
                                  "sigint_run": ("forward", "checkpoint", "cache_write", "random"),
                                  "sigint_sweep": ("between_jobs", "random")}
    kills, sigints = (q["kills"], q["sigints"]) if args.quick else (args.kills, args.sigints)
    cases = [(f"run, SIGKILL at {m}", bench.interrupt, kills, (m, signal.SIGKILL, False)) for m in q["run_moments"]]
    cases += [(f"multirun, SIGKILL at {m}", bench.interrupt, kills, (m, signal.SIGKILL, True))
              for m in q["sweep_moments"]]
    cases += [(f"run, SIGINT at {m}", bench.interrupt, sigints, (m, signal.SIGINT, False)) for m in q["sigint_run"]]
    cases += [(f"multirun, SIGINT at {m}", bench.interrupt, sigints, (m, signal.SIGINT, True))
              for m in q["sigint_sweep"]]
    concurrent = q["concurrent"] if args.quick else args.concurrent
    if concurrent:
        cases.append(("two sweeps at once, one cache + one sweep dir", bench.concurrent, concurrent, ()))
    shard_faults = q["shard_faults"] if args.quick else args.shard_faults
    if shard_faults:
        import reliability_shards  # scripts/reliability_shards.py: kill one shard, damage one partial, two at once

        cases += reliability_shards.cases(bench, shard_faults, args.quick)
    if args.quick or args.no_mount or os.geteuid() != 0:
        print("storage cases skipped (need root; --no-mount, --quick)")
        return cases
    return cases + [
        ("full disk: cache on a 64 kB tmpfs", lambda t: full_disk(bench, t, "cache", "64k"), 1, ()),
        ("full disk: run dir on a 48 kB tmpfs", lambda t: full_disk(bench, t, "run", "48k"), 1, ()),
        ("read-only cache (bind mount), populated", lambda t: read_only_cache(bench, t, True), 1, ()),
        ("read-only cache (bind mount), empty", lambda t: read_only_cache(bench, t, False), 1, ())]


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=4, help="SIGKILLs per moment of a single run and of a multirun")
    ap.add_argument("--sigints", type=int, default=2, help="SIGINTs per moment")
    ap.add_argument("--concurrent", type=int, default=3, help="pairs of simultaneous sweeps")
    ap.add_argument("--shard-faults", type=int, default=2,
                    help="iterations of each sharded-pass case (kill one shard, damage one partial, two at once)")
    ap.add_argument("--only", help="run only the cases whose name contains one of these comma-separated "
                                   "words (e.g. shards); the fuzzers only if one of them is fuzz")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fuzz-examples", type=int, help="inputs per fuzz target (default 2000; --quick: 100)")
    ap.add_argument("--no-mount", action="store_true", help="skip the tmpfs / read-only cases")
    ap.add_argument("--quick", action="store_true",
                    help="one iteration of a representative subset (of the shard cases: kill one shard), no "
                         "mounts, 100 rows, 100 fuzz inputs: a few minutes (CI); overrides --kills, --sigints, "
                         "--concurrent, --shard-faults")
    ap.add_argument("--work", help="working folder (default: a temp dir, removed at the end)")
    ap.add_argument("--json", help="write the details here")
    args = ap.parse_args(argv)
    if args.fuzz_examples is None:
        args.fuzz_examples = QUICK["fuzz_examples"] if args.quick else 2000
    if args.fuzz_examples < 0:
        ap.error(f"--fuzz-examples must be 0 or more, not {args.fuzz_examples}")
    args.only = [w for w in args.only.split(",") if w] if args.only else []
    if args.only and "fuzz" not in args.only:
        args.fuzz_examples = 0
    return args


def main(argv=None) -> int:
    args = parse(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="cscore-reliability-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    bench = Bench(work, args.seed, rows=QUICK["rows"] if args.quick else 200)
    ref = bench.reference()
    print(f"reference: {ref}", flush=True)
    rows = []
    for name, fn, n, extra in plan(args, bench):
        if args.only and not any(w in name for w in args.only):
            continue
        tally = Tally(name)
        for _ in range(n):
            fn(tally, *extra)
        rows.append(tally.row())
        print(f"{name}: {tally.row()}", flush=True)
    fuzz = fuzz_rows(args.fuzz_examples, args.seed) if args.fuzz_examples else []
    print()
    print(table(rows, fuzz, args.seed, args.fuzz_examples))
    findings = [f for r in rows for f in r["findings"]] + [f for r in fuzz for f in r["findings"]]
    bad = sum(r["lost"] + r["recomputed"] + r["corrupt_read_as_complete"] + r["final_differs"] for r in rows)
    print(f"\n{sum(r['iterations'] for r in rows)} interrupted or faulted runs, {sum(r['signals'] for r in rows)} "
          f"signals; lost/recomputed/corrupt/differing: {bad}; findings: {len(findings)}; "
          f"{time.perf_counter() - start:.0f} s")
    for f in findings:
        print(f"  finding: {f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"reference": ref, "rows": rows, "fuzz": fuzz, "seed": args.seed},
                                              indent=1, default=str))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad or findings else 0


if __name__ == "__main__":
    sys.exit(main())
