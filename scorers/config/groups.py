"""The schema of the preset groups whose files choose their own values (data, prompt,
judge_prompt, tracking) and of the stage commands (``cscore cdm``, ``cscore t5score``: their
defaults are written here once, the ConfigStore nodes ``schema/cdm`` and ``schema/t5score``
that conf/cdm.yaml and conf/t5score.yaml build on). Mappings (``data.columns``,
``prompt.templates``, ...) are one setting each: their keys are the preset's own."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.scorers.methods.params import Param, setting

TEXT = Param(str, nullable=True)


@dataclass
class Data:
    """``data=<preset>`` (conf/data/): which dataset and how it is read. Keys a preset does not
    have are not read for that dataset; each loader checks its own."""
    name: str = setting("", doc="the dataset (its loader)")
    path: str | None = setting(None, doc="another file / folder of the dataset's layout; null: the default file")
    root: str | None = setting(None, doc="MQM: the folder of the per-pair files (default: the shared mqm/ folder)")
    source_file: str | None = setting(None, doc="a file name inside the dataset's shared folder")
    hub_id: str | None = setting(None, doc="load with datasets.load_dataset(hub_id, split=...) (needs network)")
    hub_split: str | None = setting(None, doc="the split of hub_id")
    annotations: str | None = setting(None, doc="SummEval: its original model_annotations.aligned.jsonl, whose "
                                                "per-expert ratings give SummaC's labels")
    split: str | None = setting(None, doc="which split of a DatasetDict (may be left out when there is only one)")
    task: str | None = setting(None, doc="summarization | translation | dialogue (picks the prompt)")
    level: str | None = setting(None, doc="FED: turn | dialog | both")
    lang_pair: str | None = setting(None, doc="e.g. zh-en (needed for a file other than the default)")
    pairs: list | None = setting(None, doc="MQM: the language pairs read")
    files: dict | None = setting(None, doc="MQM: {pair: file name} under root")
    paths: dict | None = setting(None, doc="MQM: per-pair file override")
    columns: dict | None = setting(None, doc="role -> column name; null: a column named like the role, if there is one")
    reference_system: str | None = setting(None, doc="a system whose target serves as the reference (e.g. refA)")
    exclude_systems: list | None = setting(None, doc="list of system names to leave out")
    exclude_references: bool = setting(False, doc="drop human reference \"systems\" (ref-A, refB, ...) as WMT "
                                                  "meta-evaluation does")
    zero_weight_categories: list | None = setting(None, doc="MQM: error categories weighted 0 (e.g. [Other])")
    split_by: str | None = setting(None, doc="the column correlations are also given per value of (e.g. lang_pair)")
    template: str | None = setting(None, doc="null: the prompt group's template for the task; or a task name / "
                                             "a string with {source}")
    judge_aspect: str | None = setting(None, doc="the aspect method=cd_judge rates unless method.aspect is given")


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
