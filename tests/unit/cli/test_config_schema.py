"""The typed config (issue 21 part 2, issue 25): every preset under conf/ composes into the
schema's typed objects; the generated reference names every key a composed preset has; the
committed reference page is the generated one; each method's Params agree with what its
functions take; a bad value is one line with exit 2 (a stage command's too)."""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf, open_dict

from cscore.cli.config_reference import config_reference_markdown
from cscore.errors import ConfigError
from cscore.run.typed import RunConfig, typed
from cscore.scorers import methods
from cscore.scorers.methods.params import check_section, defaults_of
from cscore.tests.support import REPO
from cscore.tests.support.presets import composed, presets
from cscore.training.params import Cdm, T5Score

PAGE = REPO / "docs" / "reference" / "config.md"


PRESETS = presets()


@pytest.fixture(scope="module")
def discriminator_dir(tmp_path_factory) -> Path:
    """What method=cdm_gen's model= names: a directory with the record `cscore cdm train` writes last."""
    from cscore.scorers.methods.cdm_gen import META_FILE

    folder = tmp_path_factory.mktemp("disc")
    (folder / META_FILE).write_text(json.dumps({"kind": "pooler"}))
    return folder


def compose(name: str, overrides: list[str]) -> dict:
    """The config resolved, without its hydra node (support/presets.py: one compose per session,
    test_pins_config.py's too)."""
    cfg = composed(name, overrides)
    with open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_container(cfg, resolve=True)


COMPOSED: dict = {}  # preset -> its composed config: each preset composes once per session


def preset_config(preset: str, discriminator_dir: Path) -> tuple[str, dict]:
    name, overrides = PRESETS[preset]
    if overrides == ["method=cdm_gen"]:  # it scores with a trained discriminator only
        overrides = [*overrides, f"model={discriminator_dir}"]
    if preset not in COMPOSED:
        COMPOSED[preset] = compose(name, overrides)
    return name, copy.deepcopy(COMPOSED[preset])


@functools.cache
def reference_page() -> str:
    return config_reference_markdown()


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_composes_into_the_typed_schema(preset, discriminator_dir):
    name, c = preset_config(preset, discriminator_dir)
    run = typed(c)
    assert isinstance(run, RunConfig)
    assert isinstance(run.method, methods.get(c["method"]["name"]).Params)
    assert run.method.variant == c["method"]["variant"]
    assert run.runtime.token_budget == c["runtime"]["token_budget"] and run.split.use == c["split"]["use"]
    assert run.pair.expert.path == c["pair"]["expert"]["path"]
    assert run.tracking.name == (c.get("tracking") or {"name": "none"})["name"]
    assert (run.judge_prompt is None) == (not c.get("judge_prompt"))
    if name != "config":  # a stage's own section, checked against its schema
        schema = {"cdm": Cdm, "t5score": T5Score}[name]
        stage = check_section(schema, c[name], name)
        assert defaults_of(type(stage)) == defaults_of(schema)  # conf/<stage>.yaml chooses nothing else
        assert stage.train.seed == c[name]["train"]["seed"]


def test_cdm_gen_without_a_discriminator_is_one_line():
    with pytest.raises(ConfigError, match="method=cdm_gen scores with a trained discriminator"):
        typed(compose("config", ["method=cdm_gen"]))


def paths(node: dict, prefix: str = ""):
    for key, value in node.items():
        yield f"{prefix}{key}", value


def missing_keys(node: dict, reference: str, prefix: str = "") -> list[str]:
    """Keys of ``node`` (nested: dotted) that the reference does not name. A mapping named by
    the reference whose keys are not listed (data.columns, prompt.templates) is one setting."""
    out = []
    for path, value in paths(node, prefix):
        if f"`{path}`" not in reference and f"`{path}." not in reference:
            out.append(path)
        elif isinstance(value, dict) and f"`{path}." in reference:
            out += missing_keys(value, reference, f"{path}.")
    return out


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_key_of_every_preset_is_in_the_reference(preset, discriminator_dir):
    _, c = preset_config(preset, discriminator_dir)
    assert missing_keys(c, reference_page()) == []


def test_the_reference_names_what_it_is_made_from():
    text = config_reference_markdown()
    assert "| `runtime.token_budget` | int or str | `4096` | an integer >= 1 or auto |" in text
    assert "| `method.gamma` | float | `0.1` | a number in [0, 1] | amateur scaling (Sec. 4.4) |" in text
    assert "`cdm.train.lr`" in text and "`t5score.train.holdout`" in text and "`baseline.bleu.tokenize`" in text


def test_the_committed_reference_page_is_the_generated_one():
    assert PAGE.read_text() == config_reference_markdown(), "run python scripts/config_reference.py"


@pytest.mark.parametrize("name", sorted(methods.METHODS))
def test_each_methods_params_are_what_its_functions_take(name):
    method = methods.get(name)
    takes = set(methods.defaults(name))
    if method.kind == "token":  # its length handling is among its settings (cdm: pooling for norm)
        assert set(method.aggregation_keys()) <= takes
    assert issubclass(method.Params, methods.MethodParams) and method.name == name
    assert [f.name for f in fields(method.Params)][:2] == ["name", "variant"]
    assert method.Params().name == name


def test_method_defaults_come_from_the_params_dataclass():
    """The library's defaults and the composed config's are the same, written once."""
    c = compose("config", ["method=cdm_classifier"])
    given = {k: v for k, v in c["method"].items() if k not in ("name", "variant")}
    assert methods.defaults("cdm_classifier") == given
    assert methods.defaults("contrast")["gamma"] == methods.get("contrast").Params().gamma == 0.1


def test_schema_sections_are_dataclasses_with_a_meaning_for_every_setting():
    from cscore.config.groups import Data, JudgePrompt, Prompt, Tracking
    from cscore.config.run import RunSettings

    def undocumented(cls, prefix=""):
        out = []
        for f in fields(cls):
            default = f.default_factory() if f.default is MISSING else f.default
            if is_dataclass(default):
                out += undocumented(type(default), f"{prefix}{f.name}.")
            elif not f.metadata.get("doc"):
                out.append(prefix + f.name)
        return out

    for cls in (RunSettings, Data, Prompt, JudgePrompt, Tracking, Cdm, T5Score,
                *(m.Params for m in methods.METHODS.values())):
        assert undocumented(cls) == [], cls.__name__


@pytest.mark.parametrize(("args", "message"), [
    (["run", "runtime.token_budget=0"], "runtime.token_budget must be an integer >= 1 or auto, got 0"),
    (["run", "method=cd_score", "method.alpha=0"], "method.alpha must be a number in (0, 1], got 0"),
    (["run", "+runtime.budget=1"], "unknown setting runtime.budget (did you mean token_budget?)"),
])
def test_a_bad_setting_is_one_line_with_exit_2(cscore_main, tmp_path, args, message):
    res = cscore_main(*args, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_the_mkdocs_hook_writes_the_page_and_leaves_a_current_one_alone(tmp_path):
    import importlib.util

    hook = REPO / "docs" / "hooks" / "config_reference.py"
    spec = importlib.util.spec_from_file_location("config_reference_hook", hook)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = tmp_path / "reference" / "config.md"
    module.on_pre_build({"docs_dir": str(tmp_path)})
    assert page.read_text() == config_reference_markdown()
    before = page.stat().st_mtime_ns
    module.on_pre_build({"docs_dir": str(tmp_path)})  # unchanged: not rewritten (no rebuild loop under serve)
    assert page.stat().st_mtime_ns == before
    page.write_text("stale")
    module.on_pre_build({"docs_dir": str(tmp_path)})
    assert page.read_text() == config_reference_markdown()
