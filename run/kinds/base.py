"""The ``MethodKind`` base (a kind owns its methods' plan and score steps), the types the stages pass between
them (``Loaded``, ``Plan``, ``Scored``, ``RunState``) and the ``Registry`` kinds join by decorator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Protocol, TypedDict

import pandas as pd

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.errors import KindError
from cscore.progress import Progress
from cscore.registry import Registry as GenericRegistry
from cscore.registry import suggest

if TYPE_CHECKING:
    from cscore.data.schema import LoadReport
    from cscore.run.variants import Variant
    from cscore.scorers.engine.report import EngineReport
    from cscore.scorers.store.runner import InProcess, Pending

Stage = Literal["validate", "workers", "load", "models", "score", "write"]


class RunState(TypedDict, total=False):
    """How far a run got; a kind's score step sets "score" when its passes begin."""

    stage: Stage


@dataclass
class Loaded:
    examples: pd.DataFrame
    report: LoadReport
    n_loaded: int


@dataclass
class Plan:
    variants: list[Variant]
    models: list[str]  # expert / amateur: the models the variants read
    temperatures: list[float]
    extra_scores: list[str] = field(default_factory=list)  # score.<name> columns beyond the variants'
    targets: list[str] | None = None  # human.<x> columns to correlate with (None: all of them)

    @property
    def score_columns(self) -> list[str]:
        return [f"{rundir.SCORE}{v.name}" for v in self.variants] + [f"{rundir.SCORE}{n}" for n in self.extra_scores]


class Statistics(Protocol):
    """``Scored.stats``: one engine report per pass (``PairStatistics`` or ``Passes``)."""

    @property
    def reports(self) -> Mapping[str, EngineReport]: ...


class RunModel(Protocol):
    """A scored run's model: a ``LoadedModel``, or a ``kept_pass.KeptModel`` whose weights never loaded."""

    @property
    def name(self) -> str: ...

    @property
    def info(self) -> dict: ...

    @property
    def device(self) -> object: ...

    @property
    def dtype(self) -> object: ...

    @property
    def parent(self) -> object: ...

    @property
    def load_seconds(self) -> float: ...

    def status(self) -> str: ...


@dataclass
class Scored:
    table: pd.DataFrame  # the examples + prompt, token counts, truncation and score.<variant> columns
    stats: Statistics
    models: Mapping[str, RunModel]  # by role
    n_truncated: int
    metrics: dict[str, Any] = field(default_factory=dict)  # the kind's sections of metrics.json
    files: dict[str, str] = field(default_factory=dict)  # kind-specific run-dir files: name -> text (cdm_folds.json)
    kept: dict[str, Any] = field(default_factory=dict)  # what the kind's score step keeps for its evaluate step
    seconds: float | None = None  # the score step's own time where its passes do not give it (baselines)


@dataclass
class Passes:
    """``Scored.stats`` of a kind without token statistics: its own statistics (or None), a report per pass."""

    stats: object = None
    reports: dict[str, EngineReport] = field(default_factory=dict)


class MethodKind(ABC):
    """One kind of method: ``plan`` and ``score`` are its own; the rest default to a token method's."""

    name: ClassVar[str] = ""
    sections: ClassVar[tuple[str, ...]] = ()  # the top-level metrics.json keys its score step writes
    splits: ClassVar[bool] = True  # its passes can be split over processes (the token statistics pass)
    judge_prompt: ClassVar[bool] = False  # its methods read the judge_prompt group (no other kind may name one)
    scoring_prompt: ClassVar[bool] = True  # it builds the prompt group's scoring prompt (a judge: its own)
    builds_on: ClassVar[tuple[str, ...]] = ()  # the kinds whose module its own may import (none)

    @abstractmethod
    def plan(self, run: RunConfig) -> Plan: ...

    def kept(self, run: RunConfig, loaded: Loaded, plan: Plan) -> Scored | None:
        """The scored run read from the statistics cache before anything loads (None: ``score`` runs)."""
        return None

    @abstractmethod
    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
              state: RunState, coordinator: InProcess) -> Scored | Pending:
        """The scored table, or ``Pending``: a pass waits for parts this process does not run."""

    def rows(self, run: RunConfig) -> list[Variant]:
        """The method's variant rows, as planned when the config was typed (``RunConfig.method_plan``)."""
        return list(run.method_plan.rows)

    def signature_fields(self, run: RunConfig) -> dict[str, Any]:
        """The fields of the run's signature that depend on the kind: which pair, which prompt."""
        return {"pair": run.pair.name, "prompt": f"{run.prompt.name}/{run.prompt.condition}"}

    def title(self, run: RunConfig) -> str:
        return f"{run.data.name} / {run.pair.name} / {run.method.variant}"

    def dir_label(self, c: dict) -> tuple[str, str] | None:
        """(part, text) that names a run directory in place of its models (None: the models)."""
        return None

    def evaluate(self, scored: Scored, correlate: Callable[[Any, Any, str], float]) -> None:
        """After the score step, what the kind measures itself with ``correlate(x, y, "spearman")``."""

    def other_models(self, c: dict) -> dict[str, tuple[str, str | None]]:
        """{config key: (spec, revision)} of the models it loads beyond the pair."""
        return {}

    def summary_lines(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        """(style, text) lines for the end-of-run summary from its metrics.json sections."""
        return []


class Registry(GenericRegistry[MethodKind]):
    """Kinds by name: ``@REGISTRY`` on a MethodKind subclass; ``get`` gives the class, ``kind`` its one instance."""

    refusal = KindError

    def __init__(self):
        super().__init__("kind", MethodKind, error=KindError)
        self.instances: dict[str, MethodKind] = {}

    def check(self, name: str, cls: type[MethodKind]) -> None:
        if cls.__abstractmethods__:
            missing = ", ".join(sorted(cls.__abstractmethods__))
            raise KindError(f"kind {name!r} ({cls.__name__}) does not define {missing}")

    def add(self, name: str, cls: type[MethodKind]) -> None:
        super().add(name, cls)
        self.instances[name] = cls()

    def unknown(self, name: str) -> str:
        return f"no method kind {name!r}{suggest(name, self.entries)}; registered: {', '.join(sorted(self.entries))}"

    def kind(self, name: str) -> MethodKind:
        """The kind's one instance (an unknown name: the one-line KindError)."""
        self.get(name)
        return self.instances[name]


REGISTRY = Registry()
