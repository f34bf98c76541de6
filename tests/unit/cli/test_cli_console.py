"""Readable consoles (issue 20, items 4 and 5): tables whole at 80 and 160 columns, short
--help / --cfg job, --version, labels and run directories named after what ran, baseline names,
a plain progress line off a terminal."""

import io
import re

import pytest
from rich.console import Console

from cscore.metaeval import render

ASPECTS = ["consistency", "fluency", "relevance", "overall", "coherence", "engagement", "informativeness"]
LABELS = ["expert", "amateur", "ensemble", "contrast_released", "bertscore_p", "bertscore_r", "bertscore_f1",
          "rougeLsum"]


def printed(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def table_cells(text: str) -> list[str]:
    """Every cell of every boxed table in ``text``, stripped."""
    return [c.strip() for line in text.splitlines() if line.startswith(("│", "┃"))
            for c in re.split("[│┃]", line)[1:-1]]


def wide_table() -> render.Table:
    columns = ASPECTS + ["AVG"]
    rows = [(name, [f"{(-1) ** i * 0.1234 * (i + 1) * (j + 1) / 10:.4f}" for j in range(len(columns))])
            for i, name in enumerate(LABELS)]
    return render.Table("demo / gemma3-270m+gemma3-270m[:auto] / contrast_released - kendall (tau-b)", columns,
                        rows, "data:demo|n:160|split:all|pair:gemma3-270m|method:contrast", "metric", {(3, 7)})


@pytest.mark.parametrize("width", [80, 160])
def test_a_wide_table_prints_every_label_and_number_whole(width):
    t = wide_table()
    text = printed(render.rich(t), width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    cells = table_cells(text)
    for name, values in t.rows:
        assert name in cells, name
        assert all(v in cells for v in values), name
    for col in t.columns:
        assert col in cells, col
    assert t.title in " ".join(text.split())  # the title may wrap at a space, never cut
    assert t.signature in "".join(text.split())
    tables = text.count("┏")
    assert tables == (1 if width == 160 else 2)  # at 80 the columns go to a second table


def test_a_column_too_wide_for_the_console_folds_rather_than_being_cut():
    t = render.Table("T", ["a" * 50], [("row_label_" * 4, ["0.5000"])], row_header="metric")
    text = printed(render.rich(t), 80)
    assert "…" not in text and "a" * 20 in text and "0.5000" in text
    assert max(len(line) for line in text.splitlines()) <= 80


# --- the run's console end to end: 80 columns on a terminal, 160 off one -------------------------


def wide_ratings(folder) -> list[str]:
    """16 demo rows with seven human aspects: the run's arguments (method=baseline)."""
    import json

    import pandas as pd

    from cscore.data.demo import DEMO_FILE

    rows = [json.loads(line) for line in DEMO_FILE.read_text().splitlines()[:16]]
    human = [{a: (i * (j + 2)) % 5 + j % 2 for j, a in enumerate(ASPECTS)} for i in range(len(rows))]
    table = pd.DataFrame([{"src": r["source"], "hyp": r["hypothesis"], "ref": r["reference"], **h}
                          for r, h in zip(rows, human)])
    path = folder / "wide.csv"
    table.to_csv(path, index=False)
    return ["data=table", f"data.path={path}", "data.task=summarization", "data.columns.source=src",
            "data.columns.hypothesis=hyp", "data.columns.reference=ref", f"data.columns.human=[{','.join(ASPECTS)}]",
            "method=baseline", "runtime.progress=false"]


@pytest.mark.parametrize("terminal", [True, False])
def test_run_tables_are_whole_at_80_columns_on_a_terminal_and_160_off_one(terminal, tmp_path, monkeypatch,
                                                                          cscore_main):
    """The row labels are baseline names given as the rows they write (rouge1, bertscore_f1)."""
    import pandas as pd

    if terminal:  # a terminal 80 columns wide, as rich sees one
        for key, value in {"COLUMNS": "80", "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0", "NO_COLOR": "1"}.items():
            monkeypatch.setenv(key, value)
    else:
        monkeypatch.delenv("COLUMNS", raising=False)
    res = cscore_main("run", *wide_ratings(tmp_path), "baseline=[bleu,chrf,rouge1,bertscore_f1]",
                      f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", res.stdout)
    width = 80 if terminal else 160
    lines = [line for line in text.splitlines() if line.startswith(("┏", "┃", "│", "└"))]
    assert lines and max(len(line) for line in lines) <= width
    assert "…" not in text
    corr = pd.read_csv(tmp_path / "run" / "correlations.csv")
    cells = table_cells(text)
    labels = ["bleu", "chrf", "rouge1", "rouge2", "rougeL", "bertscore_p", "bertscore_r", "bertscore_f1"]
    assert sorted(set(corr["metric"])) == sorted(labels)
    for label in labels:
        assert cells.count(label) == 3 * (2 if terminal else 1), label  # three kinds, split in two at 80
    for aspect in ASPECTS + ["AVG"]:
        assert aspect in cells, aspect
    for value in corr["value"].dropna():  # every correlation of every kind, whole
        assert f"{value:.4f}" in cells


# --- a short config: judge prompt templates only where a judge runs ----------------------------


def test_help_and_cfg_job_are_short_without_a_judge(tmp_path, cscore_main):
    for args in (["--help"], ["--cfg", "job"]):
        res = cscore_main("run", *args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert len(res.stdout.splitlines()) < 150, args  # 427 and 403 lines with the templates
        assert "judge_prompt:" not in res.stdout.splitlines() and "Evaluation Steps" not in res.stdout
    res = cscore_main("run", "--cfg", "job", "method=cd_judge", cwd=tmp_path)
    assert "judge_prompt:" in res.stdout.splitlines() and "name: geval" in res.stdout
    assert "Evaluation Steps" in res.stdout


def test_judge_prompts_come_with_the_judge_methods_only(tmp_path, cscore_main):
    from importlib import resources

    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    geval = OmegaConf.load(str(resources.files("cscore.conf") / "judge_prompt" / "geval.yaml"))
    with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
        assert "judge_prompt" not in compose("config")
        judge = compose("config", ["method=cd_judge"])
        assert judge.judge_prompt == geval  # the file as it is: the same prompts, the same cache keys
        assert list(judge) == ["data", "pair", "judge_prompt", "method", *list(compose("config"))[3:]]  # its place
        assert compose("config", ["method=cd_judge_released"]).judge_prompt.name == "released"
        assert compose("config", ["method=cd_judge", "judge_prompt=released"]).judge_prompt.name == "released"
    res = cscore_main("run", "judge_prompt=released", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "cscore: error: judge_prompt=released is for the judge methods (method=cd_judge | cd_judge_released); "
        "this run has method=contrast"]
    assert not (tmp_path / "outputs").exists()


def test_version(tmp_path, cscore_main):
    import cscore

    res = cscore_main("--version", cwd=tmp_path)
    assert res.returncode == 0
    assert re.fullmatch(rf"cscore {re.escape(cscore.__version__)} \(torch \S+, transformers \S+, python \S+\)\n",
                        res.stdout)


# --- names: baselines, labels, run directories ------------------------------------------------


def test_wrong_baseline_names_are_listed_together(tmp_path, cscore_main):
    res = cscore_main("run", "method=baseline", "baseline=[rogue,blue,bleu]", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "cscore: error: no baseline config 'rogue' (did you mean rouge?), 'blue' (did you mean bleu?); available: "
        "bleu, chrf, rouge, bertscore, bartscore, t5score, external (a row one writes, such as rouge1 or "
        "bertscore_f1, names it too)"]
    assert not (tmp_path / "outputs").exists()


def test_row_labels_name_their_baseline():
    from cscore.cli.baseline_names import canonical_names

    assert canonical_names(["method=baseline", "baseline=[rouge1,rougeL,bertscore_f1,bleu]"]) == [
        "method=baseline", "baseline=[rouge,bertscore,bleu]"]
    assert canonical_names(["baseline=bartscore_f"]) == ["baseline=bartscore"]
    assert canonical_names(["-m", "baseline=rouge2,chrf"]) == ["-m", "baseline=rouge,chrf"]
    assert canonical_names(["baseline.rouge.types=[rouge1]"]) == ["baseline.rouge.types=[rouge1]"]


def test_labels_show_values_as_the_config_writes_them():
    from types import SimpleNamespace

    from cscore.metaeval.tables import _labels

    run = SimpleNamespace(config={"pair": {"name": "p"}})
    entries = [{"method": "contrast", "variant": "contrast", "params": {"clamp": None, "skip_first": False},
                "run": run},
               {"method": "contrast", "variant": "contrast", "params": {"clamp": -20.0, "skip_first": True},
                "run": run}]
    assert _labels(entries) == ["p contrast clamp=null skip_first=false", "p contrast clamp=-20.0 skip_first=true"]


@pytest.mark.parametrize("overrides, label", [
    (["pair.expert.path=gguf:gemma3-270m", "method=single"], "gemma3-270m"),
    (["pair.expert.path=gguf:gemma3-270m"], "gemma3-270m+gemma3-270m[:auto]"),
    (["method=single", "method.model=amateur"], "smollm2[:auto]"),
    (["pair=gemma3_270m", "method=single"], "gemma3-270m"),
    (["pair=gemma3_270m"], "gemma3_270m"),
    (["pair.expert.path=gguf:gemma3-270m", "method=single", "pair.name=mine"], "mine"),
])
def test_a_label_names_the_models_that_run(overrides, label):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from cscore.cli.names import pair_name

    with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
        cfg = compose("config", overrides)
    assert pair_name(OmegaConf.to_container(cfg, resolve=True), overrides)[0] == label


def test_a_multirun_folder_names_what_its_jobs_share(tmp_path, cscore_main):
    res = cscore_main("run", "-m", *wide_ratings(tmp_path), "baseline=bleu,chrf", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    assert sweep.name.endswith("_table_sweep_baseline")  # the baselines differ between its jobs
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1"]
    assert all((sweep / j / "metrics.json").is_file() for j in ("0", "1"))


# --- a single-model run: its folder, its label, plain progress lines off a terminal ---------------


@pytest.mark.slow
def test_a_single_model_run_is_named_after_its_model_and_prints_progress_lines(tiny_dirs, tmp_path, cscore_cli):
    import json

    from cscore.data.demo import DEMO_FILE
    from cscore.metaeval.signature import Signature

    data = tmp_path / "eight.jsonl"
    data.write_text("\n".join(DEMO_FILE.read_text().splitlines()[:8]) + "\n")
    res = cscore_cli("run", f"pair.expert.path={tiny_dirs.expert}", "method=single", f"data.path={data}",
                     "runtime.progress=0.001", "runtime.token_budget=200", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (run,) = (tmp_path / "outputs").glob("*/*")
    assert run.name.endswith("_demo_expert_single")  # the model that ran, not the pair config (smollm2)
    sig = Signature.parse(json.loads((run / "metrics.json").read_text())["signature"]).fields
    assert sig["pair"] == "expert" and "amateur" not in sig  # no amateur claimed
    steps = [tuple(map(int, m.groups())) for m in re.finditer(r"^scoring with expert: (\d+)/(\d+) items", res.stdout,
                                                              re.M)]
    assert len(steps) >= 2 and steps[-1] == (8, 8)  # a line per batch at this interval, the last when done
    assert [d for d, _ in steps] == sorted(d for d, _ in steps)
    assert "done in" in res.stdout and "\r" not in res.stdout  # plain lines, no live bar


def test_plain_progress_lines_come_every_interval():
    from cscore.progress import Lines

    console = Console(file=io.StringIO(), width=160)
    now = [0.0]
    advance = Lines(console, every=10, clock=lambda: now[0]).factory("expert", 100)
    for _ in range(40):  # 2.5 items per second for 40 s
        now[0] += 1.0
        advance(2 if now[0] % 2 else 3)
    out = console.file.getvalue().splitlines()
    assert out == ["scoring with expert: 25/100 items (25%), 2.5 items/s, about 30s left",
                   "scoring with expert: 50/100 items (50%), 2.5 items/s, about 20s left",
                   "scoring with expert: 75/100 items (75%), 2.5 items/s, about 10s left",
                   "scoring with expert: 100/100 items (100%), 2.5 items/s, done in 40s"]
