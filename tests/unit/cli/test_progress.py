"""Progress off a terminal (progress.py): the work line before a pass (items, tokens, decode
steps as the pass planned them), the estimate after its first batch and the quick slice where it
is long on a CPU, heartbeat lines while a batch runs (an injected clock, no sleeps), and the
counts and samples/s of a judge run's progress, summary and metrics.json agreeing."""

import io
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from cscore.progress import Lines, rate_text
from cscore.run.slice_hint import quick_slice
from cscore.scorers.engine import cpu
from cscore.scorers.engine.pass_options import PassOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def lines_of(**kw):
    console = Console(file=io.StringIO(), width=200)
    now = [0.0]
    return Lines(console, clock=lambda: now[0], heartbeat=False, **kw), now, console


def printed(console) -> list[str]:
    return console.file.getvalue().splitlines()


def cpu_run() -> SimpleNamespace:
    """What quick_slice reads of a run: its passes on a CPU, all the data (dev slices of 0.1)."""
    return SimpleNamespace(passes=PassOptions(device="cpu"),
                           split=SimpleNamespace(use="all", dev_fraction=0.1, dev_ids=None))


def test_heartbeat_lines_come_while_a_batch_runs():
    """No item done for 35 s: a line at 10, 20 and 30 s (the heartbeat's ``tick``), none between;
    none after the pass ends or stops."""
    lines, now, console = lines_of(every=10)
    advance = lines.factory("expert", 8)
    for t in np.arange(0.5, 35.0, 0.5):
        now[0] = float(t)
        lines.tick()
    assert printed(console) == [f"scoring with expert: 0/8 items (0%), - items/s, {s}s so far, time left unknown"
                                for s in (10, 20, 30)]
    now[0] = 41.0
    advance(8)  # the pass ends: its last line, then the heartbeat is quiet
    now[0] = 90.0
    lines.tick()
    assert printed(console)[3:] == ["scoring with expert: 8/8 items (100%), 0.2 items/s, done in 41s"]
    lines.factory("amateur", 4)
    lines.stop()
    now[0] = 200.0
    lines.tick()
    assert len(printed(console)) == 4


def test_heartbeat_lines_at_most_one_a_second():
    """runtime.progress=0.001 (a line per batch) does not make the heartbeat print every tick."""
    lines, now, console = lines_of(every=0.001)
    lines.factory("expert", 8)
    for t in (0.25, 0.5, 0.75, 1.0, 1.25, 2.0):
        now[0] = t
        lines.tick()
    assert [x.split(", ")[-2] for x in printed(console)] == ["1s so far", "2s so far"]


def test_heartbeat_thread_starts_and_stops():
    lines, _, _ = lines_of(every=10)
    lines.heartbeat = True
    lines.start()
    assert lines._stop is not None
    lines.stop()
    assert lines._stop is None and lines.active is None


def test_estimate_after_the_first_batch_and_the_quick_slice(monkeypatch):
    """First 10 of 100 items in 30 s: 270 s left; a 300 s pass on a CPU gets the dev slice of
    60 / 300 = 0.2 of the groups (of 0.5 when already on a dev split of 0.5: 0.1), at least one
    group; none for a short pass or on CUDA."""
    monkeypatch.setattr(cpu, "cpu_flags", lambda: frozenset({"avx2"}))  # no bfloat16 units
    run = cpu_run()
    lines, now, console = lines_of(every=1000, hint=quick_slice(run))
    p = lines.factory("expert", 100)
    p.work(tokens=12345)
    now[0] = 30.0
    p(10)
    out = printed(console)
    assert out[0] == "expert: 100 items, 12,345 tokens to run"
    assert re.fullmatch(r"expert: first 10 of 100 items in 30\.0s; about 270s left \(done about \d\d:\d\d\)", out[1])
    assert out[2] == "long on a CPU: split.use=dev split.dev_fraction=0.2 runs a slice of whole groups " \
                     "(about 60s for this pass)"
    assert len(out) == 3
    now[0] = 60.0
    p(10)
    assert len(printed(console)) == 3  # the estimate once
    run.split.use, run.split.dev_fraction = "dev", 0.5
    assert "split.dev_fraction=0.1 " in quick_slice(run)(300.0)
    assert "split.dev_fraction=0.04 " in quick_slice(run)(800.0)  # 0.0375 rounded up
    assert "split.dev_fraction=0.05 " in quick_slice(run, groups=10)(800.0)  # one group of the data's 20
    assert quick_slice(run)(100.0) is None  # short
    run.passes = PassOptions(device="cuda")
    assert quick_slice(run)(3000.0) is None


def test_a_float32_run_on_a_cpu_with_bfloat16_units_is_told_so(monkeypatch):
    """issue 50 item 3: the long-work line names the CPU's bfloat16 units (read from cpuinfo's
    flags) when the run is in float32 (auto on a CPU), not when it is already bfloat16 or on CUDA."""
    assert cpu.bf16_units(frozenset({"fpu", "avx512_bf16", "amx_bf16"})) == "AMX-BF16 and AVX512-BF16"
    assert cpu.bf16_units(frozenset({"fpu", "avx512f"})) is None
    monkeypatch.setattr(cpu, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    run = cpu_run()
    line = quick_slice(run)(300.0)
    assert line == ("long on a CPU: split.use=dev split.dev_fraction=0.2 runs a slice of whole groups (about 60s "
                    "for this pass); this CPU has bfloat16 units (AVX512-BF16): runtime.dtype=bfloat16 runs faster, "
                    "with scores that differ slightly from float32's (docs/performance.md, bfloat16 on a CPU)")
    run.split.use, run.split.dev_fraction = "dev", 0.01  # already a small slice: the bfloat16 note alone
    assert quick_slice(run)(300.0) == "long on a CPU: this CPU has bfloat16 units (AVX512-BF16): " \
        "runtime.dtype=bfloat16 runs faster, with scores that differ slightly from float32's (docs/performance.md, " \
        "bfloat16 on a CPU)"
    run.passes = PassOptions(device="cpu", dtype="bfloat16")
    assert quick_slice(run)(300.0) is None
    run.passes = PassOptions(device="cuda")
    assert quick_slice(run)(3000.0) is None


def test_work_line_of_a_token_pass(tiny_dirs):
    """The engine's plan, printed before its first batch: items, tokens with each distinct
    prompt once (every group fits a row of the budget), rows, packed rows."""
    from cscore.scorers.engine import engine
    from cscore.scorers.models.models import load_model

    rng = np.random.default_rng(1)
    prompts = [[int(x) for x in rng.integers(4, 390, n)] for n in (20, 9, 14)]
    items = [(p, [int(x) for x in rng.integers(4, 390, rng.integers(1, 9))]) for p in prompts for _ in range(4)]
    items.append(([7, 8, 9], [10, 11]))
    model = load_model(tiny_dirs.expert, dtype="float32").model
    lines, _, console = lines_of(every=1000)
    _, report = engine.compute(model, items, temperatures=(1.0,), progress=lines.factory("expert", len(items)))
    tokens = sum(len(p) for p in prompts) + 3 + sum(len(h) for _, h in items)
    assert report.tokens == tokens
    assert printed(console)[0] == f"expert: 13 items, {tokens:,} tokens to run (4 rows, 3 packed: a prompt once " \
                                  "for its hypotheses)"


def test_work_line_of_a_decode_tree(judge_dirs):
    """decode_all: the prompts' tokens and at most prompts x distinct rules x max_new_tokens steps."""
    import torch
    from transformers import AutoModelForCausalLM

    from cscore.scorers.judge.decode import Steps, decode_all

    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float32).eval()
    prompts = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]
    rules = [0.0, 0.5, 1.0]
    lines, _, console = lines_of(every=1000)
    decode_all(main, prompts, [[5, 5, 5]] * 3, rules, Steps(0.1, 6, set(), lambda ids: False), asst=2,
               progress=lines.factory("decode", 3))
    assert printed(console)[0] == "decode: 3 items, 9 tokens, at most 54 decode steps to run (3 prompts x 3 rules " \
                                  "x up to 6 new tokens, one tree per prompt)"
    assert printed(console)[-1].startswith("scoring with decode: 3/3 items (100%)")


def test_a_decode_of_some_prompts_counts_those_alone(judge_dirs):
    """A shard's or a resumed run's decode (issue 47 item 10): the pass's progress was made for all
    3 prompts, decode_all gets 2 of them: the work line and the end say 2 items, not 3."""
    import torch
    from transformers import AutoModelForCausalLM

    from cscore.scorers.judge.decode import Steps, decode_all

    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float32).eval()
    lines, _, console = lines_of(every=1000)
    decode_all(main, [[5, 6, 7, 8], [11, 12, 13]], [[5]] * 2, [0.5], Steps(0.1, 4, set(), lambda ids: False),
               asst=2, progress=lines.factory("decode", 3))
    assert printed(console)[0].startswith("decode: 2 items, 7 tokens, at most 8 decode steps to run")
    assert printed(console)[-1].startswith("scoring with decode: 2/2 items (100%)")


def test_items_of_several_rows_count_as_whole_items():
    """A judge's rows (values or contexts per item) counted as items: 32 items of 5 rows each,
    finished in uneven batches, end at 32/32; the work line goes to the items' pass."""
    from cscore.scorers.engine.passes import announce, per_item

    lines, now, console = lines_of(every=1000)
    factory = per_item(lines.factory, 5)
    advance = factory("expert", 160)
    announce(advance, tokens=100)
    seen = []
    for n in (7, 33, 3, 50, 67):
        now[0] += 1
        advance(n)
        seen.append(lines.active.done)
    assert seen == [1, 8, 8, 18, 32]
    assert printed(console)[0] == "expert: 32 items, 100 tokens to run"
    assert printed(console)[-1] == "scoring with expert: 32/32 items (100%), 6.4 items/s, done in 5s"


def test_rates_below_one_keep_two_digits():
    assert [rate_text(x) for x in (32 / 721, 0.5, 1.04, 12.34, float("inf"))] == ["0.044", "0.5", "1.0", "12.3", "-"]


@pytest.mark.slow
def test_values_run_counts_agree(judge_dirs, demo_rows, tmp_path, cscore_cli):
    """method.decode=values over 3 documents x 2 rows with 5 values: each pass's progress ends at
    6/6 items (not 30 prompt x value rows), the summary says "scored 6 items" and its one samples/s
    is metrics.json's, as the summary writes rates."""
    out = tmp_path / "run"
    res = cscore_cli("run", f"data.path={demo_rows(3)}", f"pair.expert.path={judge_dirs['expert']}",
                     f"pair.amateur.path={judge_dirs['other']}", "pair.amateur.early_exit=null", "pair.name=tiny",
                     "runtime.progress=0.001", "runtime.max_length=2048", "method=cd_judge", "method.decode=values",
                     "runtime.threads=1", f"hydra.run.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    n = metrics["n_items"]
    assert n == 6
    for name, speed in metrics["speed"]["passes"].items():
        ends = re.findall(rf"^scoring with {re.escape(name)}: (\d+)/(\d+) items", res.stdout, re.M)
        assert ends and ends[-1] == (str(n), str(n)), name
        work = re.findall(rf"^{re.escape(name)}: (\d+) items, ([\d,]+) tokens to run", res.stdout, re.M)
        assert work == [(str(n), f"{speed['tokens']:,}")], name
        said = re.search(rf"^{re.escape(name)}: scored (\d+) items in [\d.]+s \(", res.stdout, re.M)
        assert said and said.groups() == (str(n),), name
    speed = metrics["speed"]
    assert re.findall(r"^speed: (\d+) items scored in [\d.]+s, ([\d.]+) samples/s$", res.stdout, re.M) == [
        (str(n), rate_text(speed["samples_per_second"]))]


def test_live_bar_prints_the_work_and_counts_to_the_end():
    """On a terminal: the work line above the bar; the bar's task ends at its total."""
    from cscore.progress import Bar

    console = Console(file=io.StringIO(), width=120, force_terminal=True, force_interactive=True)
    now = [0.0]
    bar = Bar(console, clock=lambda: now[0])
    bar.start()
    try:
        p = bar.factory("expert", 6)
        p.work(tokens=40)
        now[0] = 20.0
        p(2)
        p(4)
    finally:
        bar.stop()
    task = bar.bar.tasks[0]
    assert (task.completed, task.total) == (6, 6)
    assert "expert: 6 items, 40 tokens to run" in console.file.getvalue()
    assert "expert: first 2 of 6 items in 20.0s; about 40s left" in console.file.getvalue()


def test_one_progress_draws_a_runs_passes_and_says_a_reports_steps():
    """cscore.progress.Progress: ``live()`` starts and stops the run's reporter around the passes
    and hands them its factory; off a terminal the report's ``steps`` say the first and last step
    of a table (steps within ``every`` seconds of the last line stay quiet), then that it is done."""
    from cscore.progress import Progress

    lines, now, console = lines_of(every=10)
    run = Progress(lines, lines.factory)
    with run.live() as factory:
        advance = factory("expert", 2)
        now[0] = 4.0
        advance(2)
    assert printed(console) == ["scoring with expert: 2/2 items (100%), 0.5 items/s, done in 4s"]
    with Progress().live() as none:  # runtime.progress=false: no factory, nothing drawn
        assert none is None

    said = Console(file=io.StringIO(), width=200)
    report = Progress(console=said, every=3600.0)
    with report.steps("demo quality") as update:
        for done in (1, 2, 3):
            update(done, 3, f"row {done}")
    got = [re.sub(r"^\[\s*\d+\.\ds\] ", "", x) for x in printed(said)]
    assert got == ["demo quality 1/3: row 1", "demo quality 3/3: row 3", "demo quality: done"]
    assert all(re.match(r"^\[\s*\d+\.\ds\] ", x) for x in printed(said))


class Told:
    """A pass's progress callback that keeps what the pass told it: ('part', share) within a batch,
    ('items', n) as batches end."""

    def __init__(self):
        self.said: list = []

    def __call__(self, n: int) -> None:
        self.said.append(("items", n))

    def work(self, **counts) -> None:
        pass

    def part(self, share: float) -> None:
        self.said.append(("part", round(share, 6)))


def test_estimate_from_the_share_done_within_the_first_batch():
    """Issue 39: no item done yet, but 10% of the planned work after 4 s (told within the first
    batch): the estimate line then (4 * 0.9 / 0.1 = 36 s left), and the plain lines say the time
    left from the share (at 10 s with 20% done: 10 * 0.8 / 0.2 = 40 s) instead of "unknown"; a
    share told before FIRST seconds gives no estimate yet; a 400 s pass gets the quick slice."""
    run = cpu_run()
    lines, now, console = lines_of(every=10, hint=quick_slice(run))
    p = lines.factory("expert", 100)
    p.work(tokens=500)
    now[0] = 1.0
    p.part(0.02)  # before FIRST seconds: too early to say
    assert printed(console) == ["expert: 100 items, 500 tokens to run"]
    now[0] = 4.0
    p.part(0.1)
    out = printed(console)
    assert re.fullmatch(r"expert: 10% of its work in 4\.0s; about 36s left \(done about \d\d:\d\d\)", out[1])
    assert len(out) == 2  # 40 s in all: no slice
    p.part(0.2)
    now[0] = 10.0
    lines.tick()
    assert printed(console)[2] == "scoring with expert: 0/100 items (0%), - items/s, 20% of the work, about 40s left"
    long, now, console = lines_of(every=1000, hint=quick_slice(run))
    q = long.factory("amateur", 8)
    q.work(tokens=50)
    now[0] = 4.0
    q.part(0.01)  # 400 s in all
    assert printed(console)[2].startswith("long on a CPU: split.use=dev split.dev_fraction=0.2 ")


def test_a_token_pass_tells_its_share_layer_by_layer(tiny_dirs):
    """engine.compute on the 4-layer expert, all items in one batch: the share after each layer
    (1/4, 2/4, 3/4, then at most 0.99 of the batch) before the batch's items are counted, then 1."""
    from cscore.scorers.engine import engine
    from cscore.scorers.models.models import load_model

    model = load_model(tiny_dirs.expert, dtype="float32").model
    told = Told()
    items = [([5, 6, 7], [8, 9]), ([10, 11, 12], [13, 14])]  # equal lengths: one batch, no padding to cap
    engine.compute(model, items, temperatures=(1.0,), progress=told)
    assert told.said == [("part", 0.25), ("part", 0.5), ("part", 0.75), ("part", 0.99), ("part", 1.0), ("items", 2)]


def test_a_token_pass_of_several_batches_tells_its_share_of_the_planned_tokens(tiny_dirs):
    """Two batches by the budget (padded costs a and b): after the first batch's last layer the
    share is 0.99 a / (a + b), after it a / (a + b); the seq2seq-free path, 2-layer amateur."""
    from cscore.scorers.engine import engine
    from cscore.scorers.models.models import load_model

    model = load_model(tiny_dirs.amateur, dtype="float32").model
    told = Told()
    items = [([5] * 12, [8] * 4), ([6] * 3, [9] * 2)]  # 16 and 5 tokens: one row each, a 16-token budget
    engine.compute(model, items, temperatures=(1.0,), progress=told,
                   options=PassOptions(token_budget=16, prefix_sharing=False))
    a, b = 16, 5
    assert told.said == [("part", round(0.5 * a / (a + b), 6)), ("part", round(0.99 * a / (a + b), 6)),
                         ("part", round(a / (a + b), 6)), ("items", 1),
                         ("part", round((a + 0.5 * b) / (a + b), 6)), ("part", round((a + 0.99 * b) / (a + b), 6)),
                         ("part", 1.0), ("items", 1)]


class Clocked:
    """Records what a decode tells its ``DecodeClock``s (their plans; (kind, tokens) of each event)."""

    def __init__(self, monkeypatch):
        from cscore.scorers.engine import decode_clock

        self.plans: list = []
        self.events: list = []
        base = decode_clock.DecodeClock
        outer = self

        class Recording(base):  # type: ignore[misc,valid-type]
            def __init__(self, units, start, *a, **k):
                super().__init__(units, start, *a, **k)
                outer.plans.append([(u.prefill, u.steps, u.rows) for u in units])

            def begin(self, at):
                super().begin(at)
                outer.events.append(("begin", 0))

            def event(self, kind, tokens, at):
                super().event(kind, tokens, at)
                outer.events.append((kind, tokens))

            def end(self, at):
                super().end(at)
                outer.events.append(("end", 0))

        monkeypatch.setattr(decode_clock, "DecodeClock", Recording)
        monkeypatch.setattr("cscore.scorers.judge.decode.DecodeClock", Recording)

    def units(self) -> list[tuple[float, int]]:
        """(prefill tokens, steps) each unit fed its clock."""
        out, fed, steps = [], 0.0, 0.0
        for kind, tokens in self.events:
            if kind == "begin":
                fed, steps = 0.0, 0.0
            elif kind == "end":
                out.append((round(fed, 6), round(steps, 6)))
            elif kind == "prefill":
                fed += tokens
            else:
                steps += tokens  # a step: its share of a full model's layers
        return out


def test_a_decode_tree_feeds_its_clock(judge_dirs, monkeypatch):
    """decode_all: a prompt's tree is one unit of its clock: its prefill (the prompt's tokens, told
    layer by layer), then one step a forward, at most 2 rules x (3 - 1) steps; each path runs to
    max_new_tokens (no EOS, never done), so each tree steps 2 to 4 times. The share told is the
    clock's, once it has an estimate (from the first tree's end), between 0 and 1."""
    import torch
    from transformers import AutoModelForCausalLM

    from cscore.scorers.judge.decode import Steps, decode_all

    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float32).eval()
    clocked, told = Clocked(monkeypatch), Told()
    decode_all(main, [[5, 6, 7, 8], [9, 10], [11, 12, 13]], [[5, 5]] * 3, [0.0, 1.0],
               Steps(0.1, 3, set(), lambda ids: False), asst=2, progress=told)
    assert clocked.plans == [[(4, 4, 1), (2, 4, 1), (3, 4, 1)]]
    units = clocked.units()
    assert [fed for fed, _ in units] == [4, 2, 3] and all(2 <= steps <= 4 for _, steps in units)
    parts = [s for what, s in told.said if what == "part"]
    assert parts and all(0 < s < 1 for s in parts)
    assert told.said.count(("items", 1)) == 3


def test_a_released_decode_feeds_its_clock(judge_dirs, monkeypatch):
    """released_outputs: 4 prompts in 2 batches of 2 (padded: 2 x 4 and 2 x 3 tokens), the main
    model's two rows as one tree after the separate assistant's first step: two prefills a batch,
    at most 3 - 1 steps (one forward of the batch's rows each), a step feeding 2 prompts x 2 rules."""
    from cscore.run.kinds.judge_released import released_outputs
    from cscore.scorers.api import ModelPair
    from cscore.scorers.methods.cd_judge_released import CdJudgeReleasedParams

    pair = ModelPair.load(judge_dirs["expert"], judge_dirs["amateur"], dtype="float32")
    params = CdJudgeReleasedParams(alpha=0.1, min_keep=5, max_new_tokens=3, batch_size=2)
    clocked, told = Clocked(monkeypatch), Told()
    released_outputs(pair, [[5, 6, 7, 8], [9, 10], [11, 12, 13], [14, 15]],
                     rows={"main": (0.0, 1.0), "contrast": (0.5, 1.0)}, params=params, progress=told)
    assert clocked.plans == [[(2 * 4 * 2, 2, 4), (2 * 2 * 2, 2, 4)]]
    units = clocked.units()
    assert [fed for fed, _ in units] == [16, 8] and all(1 <= steps <= 2 for _, steps in units)
    assert told.said.count(("items", 2)) == 2


def test_a_decode_clock_gives_the_first_estimate_and_the_quick_slice():
    """A decode of 40 trees (100 prefill tokens, at most 60 steps each) on a CPU: its first tree's
    prefill takes 1 s, its 5 steps 0.2 s each; from its end (2 s) the clock's share gives the
    estimate; at 3 s (the second tree's prefill done) 5 x 0.2 s for its steps and 38 trees x 2 s
    are left (77 s), and the whole 80 s decode (< LONG) gets no slice. A decode whose trees take 10
    times longer (the same events, 10 x the seconds) is 800 s: the slice."""
    from cscore.scorers.engine.decode_clock import WAIT, DecodeClock, Unit

    run = cpu_run()
    for scale, left, tip in ((1, 77, False), (10, 770, True)):
        lines, now, console = lines_of(every=1000, hint=quick_slice(run))
        p = lines.factory("decode", 40)
        p.work(steps=40 * 60)
        clock = DecodeClock([Unit(100, 60)] * 40, start=0.0)
        clock.begin(0.0)
        events = [("prefill", 100, 1.0)] + [("step", 1, 1.0 + 0.2 * k) for k in range(1, 6)]
        for kind, tokens, at in events:
            clock.event(kind, tokens, at * scale)
            assert (clock.done_share(at * scale) is None) is (at * scale < WAIT)  # no tree ended yet
        clock.end(2.0 * scale)
        clock.begin(2.0 * scale)
        clock.event("prefill", 100, 3.0 * scale)
        now[0] = 3.0 * scale
        p.part(clock.done_share(3.0 * scale))
        out = printed(console)
        assert re.fullmatch(rf"decode: 4% of its work in {3.0 * scale:.1f}s; about {left}s left "
                            r"\(done about \d\d:\d\d\)", out[1]), out
        assert ("long on a CPU: split.use=dev" in out[-1]) is tip and len(out) == 2 + tip


def test_an_early_exit_released_decode_counts_each_forward_once(judge_dirs, monkeypatch):
    """released_outputs with the amateur an early exit of the expert (its cut decoder shares the
    expert's hook dicts): rows main, contrast (one tree) and the assistant alone (the cut model's own
    decode, 1 of the expert's n layers), so a prefill of the padded 2 x 3 tokens, the cut model's
    (1/n of it) and at most (1 + 1/n) x (3 - 1) steps, each forward one event: the prefills' tokens
    exactly, the steps within the plan."""
    from cscore.run.kinds.judge_released import released_outputs
    from cscore.scorers.api import ModelPair
    from cscore.scorers.methods.cd_judge_released import CdJudgeReleasedParams
    from cscore.scorers.models.anatomy import layer_list

    pair = ModelPair.load(judge_dirs["expert"], amateur_early_exit=1, dtype="float32")
    params = CdJudgeReleasedParams(alpha=0.1, min_keep=5, max_new_tokens=3, batch_size=2)
    clocked = Clocked(monkeypatch)
    released_outputs(pair, [[5, 6, 7], [9, 10]], rows={"main": (0.0, 1.0), "contrast": (0.5, 1.0), "asst": None},
                     params=params, progress=Told())
    n = len(layer_list(pair.expert.model))
    [[(prefill, most, rows)]] = clocked.plans
    assert (prefill, most, rows) == (pytest.approx(6 * (1 + 1 / n)), pytest.approx(2 * (1 + 1 / n)), 4)
    [(fed, steps)] = clocked.units()
    assert fed == pytest.approx(6 * (1 + 1 / n)) and 1 + 1 / n <= steps <= most + 1e-9
