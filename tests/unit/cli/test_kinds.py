"""Method kinds as plugins (issue 21): the registry, every method's kind, the shared stages that
name no method or kind, rich only in cli/, every user error in errors.py with its exit code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cscore
from cscore import errors
from cscore.cli.exits import one_line_errors
from cscore.config.groups import Data, JudgePrompt, Prompt
from cscore.config.run import Pair, RunConfig
from cscore.run import kinds
from cscore.run.kinds.base import MethodKind, Registry
from cscore.scorers import methods

ROOT = Path(cscore.__file__).parent
SHARED_STAGES = ("cli/run.py", "run/stages.py", "run/summary.py")


def package_files(*under: str) -> list[Path]:
    return [f for u in under for f in (ROOT / u).rglob("*.py")]


class Complete(MethodKind):
    """A kind with its own plan and score (what they do does not matter to the registry)."""

    def plan(self, cfg):
        return None

    def score(self, cfg, loaded, plan, progress, state, shards):
        return None


def test_registry_refuses_a_collision_a_foreign_class_and_a_nameless_kind():
    reg = Registry()

    @reg
    class One(Complete):
        name = "one"

    assert reg.get("one") is One and isinstance(reg.kind("one"), One) and reg.kind("one") is reg.kind("one")

    class Again(Complete):
        name = "one"

    with pytest.raises(errors.KindError, match="registered twice: .*One and .*Again"):
        reg(Again)
    with pytest.raises(errors.KindError, match="not a MethodKind subclass"):
        reg(dict)

    class Nameless(Complete):
        pass

    with pytest.raises(errors.KindError, match="no kind name"):
        reg(Nameless)

    class NoScore(MethodKind):
        name = "no_score"

        def plan(self, cfg):
            return None

    with pytest.raises(errors.KindError, match="kind 'no_score' .*does not define score"):
        reg(NoScore)
    with pytest.raises(errors.KindError, match="no method kind 'two'; registered: one"):
        reg.kind("two")


def test_every_method_has_a_registered_kind():
    reg = kinds.registry()
    assert set(reg.entries) == {"token", "judge", "judge_released", "baseline", "pooler", "discriminator"}
    got = {m: kinds.of_method(m).name for m in methods.METHODS}
    assert got["contrast"] == "token" and got["cd_judge"] == "judge" and got["baseline"] == "baseline"
    assert got["cdm_classifier"] == "pooler" and got["cdm_gen"] == "discriminator"
    assert sorted(kinds.methods_of("judge")) == ["cd_judge", "cd_judge_released"]
    # registering a module again (a second import) is refused, not silently replaced
    with pytest.raises(errors.KindError, match="'judge' is registered twice"):
        reg(reg.get("judge"))


def test_kinds_give_signature_fields_title_and_summary_lines_as_data():
    cfg = RunConfig(data=Data(name="demo"), pair=Pair(name="tiny"), prompt=Prompt(name="p", condition="src"),
                    judge_prompt=JudgePrompt(name="geval"), method=methods.get("contrast").Params(),
                    baseline={"bleu": {}, "rouge": {}})
    reg = kinds.registry()
    assert reg.kind("token").signature_fields(cfg) == {"pair": "tiny", "prompt": "p/src"}
    assert reg.kind("judge").signature_fields(cfg) == {"pair": "tiny", "prompt": "judge/geval"}
    assert reg.kind("baseline").signature_fields(cfg) == {"pair": "none", "prompt": "none"}
    assert reg.kind("baseline").title(cfg) == "demo / baseline / bleu,rouge"
    assert reg.kind("pooler").title(cfg) == "demo / tiny / contrast"
    metrics = {"judge": {"invalid": {"cd_judge": {"No Pred": 2, "Below": 0, "Above": 1, "n": 16},
                                     "expert": {"No Pred": 0, "Below": 0, "Above": 0, "n": 16}}}}
    assert reg.kind("judge_released").summary_lines(metrics) == [
        (
            "yellow",
            "cd_judge: 3 of 16 judge outputs gave no score in range (2 No Pred, 1 Above; per row in parse.cd_judge)",
        )
    ]
    assert reg.kind("token").summary_lines(metrics) == []
    listed = {"judge": {"invalid": {"expert": {"No Pred": 0, "Below": 0, "Above": 0, "List": 2, "n": 16}}}}
    assert reg.kind("judge_released").summary_lines(listed) == [
        ("yellow", 'expert: 2 of 16 judge outputs read as a score from list numbering ("1. The summary...", as the '
                   "released parse does; parse.expert = List)")]


def test_shared_stages_name_no_method_or_kind():
    names = set(methods.METHODS) | set(kinds.registry().entries)
    for rel in SHARED_STAGES:
        src = (ROOT / rel).read_text()
        assert '"cd_judge"' not in src and '== "baseline"' not in src, rel
        literals = {
            n.value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        assert not literals & names, (rel, literals & names)
    assert len((ROOT / "cli/run.py").read_text().splitlines()) < 200


def test_kinds_say_what_they_need_and_the_checks_ask_the_kind_not_a_name():
    """A judge kind reads a judge prompt and builds its own prompts; the checks of run/pair_check.py
    (runtime.max_length against the scoring prompt) and run/validate.py (judge_prompt) ask the kind."""
    from cscore.run.validate import check_judge_prompt

    reg = kinds.registry()
    needs = {name: (reg.kind(name).judge_prompt, reg.kind(name).scoring_prompt) for name in reg}
    assert needs == {"token": (False, True), "pooler": (False, True), "discriminator": (False, True),
                     "baseline": (False, True), "judge": (True, False), "judge_released": (True, False)}
    names = set(methods.METHODS) | set(reg.entries)
    for rel in ("run/pair_check.py", "run/validate.py"):
        tree = ast.parse((ROOT / rel).read_text())
        keys = {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)} | {  # config keys: c["x"]
            id(n.args[0]) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args}
        literals = {n.value for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in keys}
        assert not literals & names, (rel, literals & names)
    with pytest.raises(errors.ConfigError) as err:
        check_judge_prompt({"method": {"name": "contrast"}, "judge_prompt": {"name": "released"}})
    assert str(err.value) == ("judge_prompt=released is for the judge methods (method=cd_judge | cd_judge_released); "
                              "this run has method=contrast")


def imported_roots(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def test_rich_is_imported_by_cli_only_among_the_stages_and_kinds():
    offenders = [str(f.relative_to(ROOT)) for f in package_files("scorers", "config", "data")
                 if "rich" in imported_roots(f)]
    assert not offenders


def test_every_user_error_class_is_defined_in_errors_py():
    user = {n for n, c in vars(errors).items() if isinstance(c, type) and issubclass(c, errors.CscoreError)}
    elsewhere = []
    for f in package_files("cli", "run", "training", "config", "scorers", "data", "metaeval"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", None)) for b in node.bases}
                if bases & user:
                    elsewhere.append(f"{f.relative_to(ROOT)}: {node.name}")
    assert not elsewhere


@pytest.mark.parametrize("err, code", [(errors.ConfigError("bad key"), 2), (errors.DataError("bad row"), 2),
                                       (errors.ModelSpecError("no model"), 1), (errors.CacheEntryError("corrupt"), 1),
                                       (errors.SlurmUnavailable("no slurm"), 1)])
def test_one_exit_policy_one_line_and_the_error_exit_code(err, code, capsys, monkeypatch):
    monkeypatch.delenv("CSCORE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as done:
        with one_line_errors():
            raise err
    assert done.value.code == code == type(err).exit_code
    assert capsys.readouterr().err == f"cscore: error: {err}\n"


def test_a_run_directory_is_named_by_the_kind_not_by_a_method_name():
    from cscore.cli.names import name_of

    base = {"data": {"name": "demo"}, "pair": {"name": "p", "expert": {"path": "gguf:smollm2"}, "amateur": {}}}
    assert kinds.of_method("baseline").dir_label({"baseline": {"bleu": {}, "chrf": {}}}) == ("baseline", "bleu+chrf")
    assert kinds.of_method("contrast").dir_label({}) is None
    c = {**base, "method": {"name": "baseline"}, "baseline": {"bleu": {}, "chrf": {}}}
    assert name_of(c, {}, [], set()) == "demo_bleu+chrf_baseline"
    assert name_of(c, {}, [], {"baseline"}) == "demo_sweep_baseline"
    assert name_of({**base, "method": {"name": "baseline"}}, {}, [], set()) == "demo_none_baseline"
    # a method that does not exist names the pair (the run's check reports it)
    assert name_of({**base, "method": {"name": "nope"}}, {}, [], set()) == "demo_p_nope"


def test_every_kind_section_of_metrics_json_has_a_schema_in_rundir():
    from cscore import rundir

    for kind in kinds.registry().entries.values():
        assert set(kind.sections) <= set(rundir.SECTIONS), kind.name
    rundir.check_section("units", "aligned")
    rundir.check_section("judge", {"score_range": [1, 5], "aspect": "a", "lam": 0.1, "t": 1.0, "invalid": {},
                                   "decode": "greedy"})
    with pytest.raises(ValueError, match=r"judge lacks \['invalid'\]"):
        rundir.check_section("judge", {"score_range": [1, 5], "aspect": "a", "lam": 0.1, "t": 1.0})
    with pytest.raises(ValueError, match="no section 'nope'"):
        rundir.check_section("nope", {})
    with pytest.raises(ValueError, match="units must be a str"):
        rundir.check_section("units", {"aligned": True})


def test_fit_judge_prompt_cuts_the_source_or_says_what_to_raise(tiny_tokenizer):
    """A judge prompt over ``room`` tokens loses the end of its source (at a word boundary), one
    that fits is kept whole, and one too long even without its source is a one-line InputError."""
    from transformers import AutoTokenizer

    from cscore.run.kinds.prompts import fit_judge_prompt
    from cscore.scorers.engine.tokenize import InputError, text_ids

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer)
    source = " ".join(["the cat sat on the mat"] * 20)
    text = f"Rate this: {source} Score:"
    span = (len("Rate this: "), len("Rate this: ") + len(source))
    full = text_ids(tok, text)
    same, ids, cut = fit_judge_prompt(tok, 0, text, span, len(full))
    assert (same, ids, cut) == (text, full, False)
    short, ids, cut = fit_judge_prompt(tok, 0, text, span, len(full) // 2)
    assert cut and len(ids) <= len(full) // 2 and ids == text_ids(tok, short)
    assert short.startswith("Rate this: the cat") and short.endswith("Score:") and len(short) < len(text)
    with pytest.raises(InputError, match=r"^item 3: the judge prompt without its source still has more than 2 "
                                          r"tokens; raise runtime.max_length$"):
        fit_judge_prompt(tok, 3, text, span, 2)
