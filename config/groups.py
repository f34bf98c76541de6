"""The schema of the preset groups that choose their own values (data, prompt, judge_prompt, tracking); a
mapping (``prompt.templates``, ...) is one setting whose keys are the preset's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cscore.scorers.methods.params import Param, setting

TEXT = Param(str, nullable=True)


@dataclass
class Data:
    """``data=<preset>`` (conf/data/): which dataset and how it is read. The keys every dataset has
    are here; the others are its loader's own options (``options``), listed below per dataset."""
    name: str = setting("", doc="the dataset (its loader)")
    path: str | None = setting(None, doc="another file / folder of the dataset's layout; null: the default file")
    split_by: str | None = setting(None, doc="the column correlations are also given per value of (e.g. lang_pair)")
    template: str | None = setting(None, doc="null: the prompt group's template for the task; or a task name / "
                                             "a string with {source}")
    judge_aspect: str | None = setting(None, doc="the aspect method=cd_judge rates unless method.aspect is given")
    # the loader's ``Options`` (the section's other keys; None: its defaults), built by run/typed.py
    options: Any = field(default=None, metadata={"doc": "the dataset's own options (its loader's Options)",
                                                 "section": True})


@dataclass
class Prompt:
    """``prompt=<preset>`` (conf/prompt/): the scoring prompt's templates."""
    name: str = setting("", doc="the preset's name")
    condition: str = setting("source", Param(str, choices=("source", "reference")),
                             "what {source} is filled with: the source (h|s) or the reference (h|r)")
    chat_template: bool = setting(False, Param(bool), "wrap the prompt in the tokenizer's chat template "
                                                      "(instruct models); papers: off")
    templates: dict = setting({}, doc="{task: template} with condition=source")
    reference_templates: dict = setting({}, doc="{task: template} with condition=reference")


@dataclass
class JudgePrompt:
    """``judge_prompt=<preset>`` (conf/judge_prompt/): the judge methods' prompts."""
    name: str = setting("", doc="the preset's name")
    style: str = setting("cscore", doc="the template style (placeholders {min} {max} {source} {hypothesis})")
    role: str = setting("user", doc="user: one user message of the judge's chat template | system")
    generation_prompt: bool = setting(True, doc="followed by the assistant header: the judge answers in its own turn")
    templates: dict = setting({}, doc="{aspect: template}; inline templates win over files")
    closing: str | None = setting(None, doc="a closing instruction after summarization templates ({aspect} filled "
                                            "in; geval: the paper's Appendix A line); null: none")
    files: dict = setting({}, doc="{aspect: path} of template files")
    dialogue_template: str | None = setting(None, doc="the dialogue template; {aspect} and {definition} are filled in")
    dialogue_aspects: dict = setting({}, doc="{aspect: definition} for the dialogue template")


@dataclass
class Tracking:
    """``tracking=none | mlflow | wandb`` (conf/tracking/): log each run to a tracker."""
    name: str = setting("none", Param(str, choices=("none", "mlflow", "wandb")), "the tracker")
    tracking_uri: str | None = setting(None, TEXT, "mlflow: null = $MLFLOW_TRACKING_URI, else a local store "
                                                   "file:./outputs/mlruns")
    experiment: str | None = setting(None, TEXT, "mlflow: the experiment name (created when missing)")
    project: str | None = setting(None, TEXT, "wandb: the project")
    entity: str | None = setting(None, TEXT, "wandb: null = your default W&B entity")
    mode: str | None = setting(None, doc="wandb: online | offline; null: $WANDB_MODE, else offline")
    dir: str | None = setting(None, TEXT, "wandb: where W&B keeps its run folders (<dir>/wandb/); null: ./outputs")
    artifacts: bool = setting(True, Param(bool), "copy the run directory into the tracker's run")
