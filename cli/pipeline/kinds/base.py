"""What every kind of method is: the ``MethodKind`` base, the types the stages pass between them
(``Loaded``, ``Plan``, ``Scored``) and the ``Registry`` kinds join by decorator.

A kind owns the plan and score steps of its methods (a method module names its kind with
``kind``; "token" when it does not), the signature fields and title that differ from a token
method's, its own summary lines (data: the CLI prints them) and its section of metrics.json. The
shared stages (load, evaluate, write) ask the kind and never a method's name. Every step reads
the run's typed config (``cscore.scorers.config.run.RunConfig``), never a DictConfig."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, TypeVar

import pandas as pd

from cscore import rundir
from cscore.errors import KindError
from cscore.progress import Progress
from cscore.registry import Registry as GenericRegistry
from cscore.registry import suggest
from cscore.scorers.config.run import RunConfig


@dataclass
class Loaded:
    examples: pd.DataFrame
    report: Any  # cscore.data.schema.LoadReport
    n_loaded: int


@dataclass
class Plan:
    variants: list
    models: list[str]  # expert / amateur: the models the variants read
    temperatures: list[float]
    extra_scores: list[str] = field(default_factory=list)  # score.<name> columns beyond the variants'
    targets: list[str] | None = None  # human.<x> columns to correlate with (None: all of them)

    @property
    def score_columns(self) -> list[str]:
        return [f"{rundir.SCORE}{v.name}" for v in self.variants] + [f"{rundir.SCORE}{n}" for n in self.extra_scores]


@dataclass
class Scored:
    table: pd.DataFrame  # the examples + prompt, token counts, truncation and score.<variant> columns
    stats: Any  # has .reports (one per pass); cscore.scorers.api.PairStatistics for token kinds
    models: dict  # role -> LoadedModel
    n_truncated: int
    metrics: dict = field(default_factory=dict)  # the kind's sections of metrics.json
    files: dict = field(default_factory=dict)  # kind-specific run-dir files: name -> text (cdm_folds.json)
    kept: dict = field(default_factory=dict)  # what the kind's score step keeps for its evaluate step
    seconds: float | None = None  # the score step's own time where its passes do not give it (baselines)


@dataclass
class Passes:
    """``Scored.stats`` of a kind without token statistics: what it kept (or None) and one
    engine report per pass, which the speed figures and the summary read."""

    stats: Any = None
    reports: dict = field(default_factory=dict)


class MethodKind(ABC):
    """One kind of method. ``plan`` and ``score`` are its own; the rest default to a token
    method's behaviour (a model pair, the scoring prompt, no summary lines, no metrics section)."""

    name: ClassVar[str] = ""
    sections: ClassVar[tuple[str, ...]] = ()  # the top-level metrics.json keys its score step writes
    shards: ClassVar[bool] = True  # its passes can be sharded (runtime.shards: the token statistics pass)

    @abstractmethod
    def plan(self, run: RunConfig) -> Plan: ...

    @abstractmethod
    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress, state: dict) -> Scored: ...

    def rows(self, run: RunConfig) -> list:
        """The method's variant rows (its own and the comparison rows) from its typed Params; the
        section as written (``RunConfig.method_given``) gives only their records' values."""
        from cscore.cli.pipeline.variants import plan

        return plan(run.method, baseline_t=run.baselines.t, rows=list(run.baselines.rows), written=run.method_given)

    def signature_fields(self, run: RunConfig) -> dict[str, Any]:
        """The fields of the run's signature that depend on the kind: which pair, which prompt."""
        return {"pair": run.pair.name, "prompt": f"{run.prompt.name}/{run.prompt.condition}"}

    def title(self, run: RunConfig) -> str:
        return f"{run.data.name} / {run.pair.name} / {run.method.variant}"

    def dir_label(self, c: dict) -> tuple[str, str] | None:
        """(part, text) that names a run directory in place of the models that run, read from the
        composed config as a plain dict (before it is checked); None: the models."""
        return None

    def evaluate(self, scored: Scored, correlate: Callable[[Any, Any, str], float]) -> None:
        """After the score step, what the kind measures itself (into ``scored.metrics`` and
        ``scored.files``) with the run's correlation (``correlate(x, y, "spearman")``: NaN
        where undefined), which the evaluate stage hands it; by default nothing."""

    def summary_lines(self, metrics: dict) -> list[tuple[str, str]]:
        """(style, text) lines for the end-of-run summary from its metrics.json sections."""
        return []


K = TypeVar("K", bound=MethodKind)


class Registry(GenericRegistry[MethodKind]):
    """Kinds by name (``cscore.registry.Registry``): ``@REGISTRY.register`` on a MethodKind subclass
    with its ``name``; a name registered twice, a class that is no MethodKind or leaves a step
    undefined is refused with one line. ``get`` gives the kind's one instance."""

    refusal = KindError

    def __init__(self, base: type[MethodKind] = MethodKind):
        super().__init__("kind", base, error=KindError)
        self.instances: dict[str, MethodKind] = {}

    def register(self, cls: type[K]) -> type[K]:  # type: ignore[override]  # the name is the class's own
        return self(cls)

    def check(self, name: str, cls: type[MethodKind]) -> None:
        if cls.__abstractmethods__:
            missing = ", ".join(sorted(cls.__abstractmethods__))
            raise KindError(f"kind {name!r} ({cls.__name__}) does not define {missing}")

    def add(self, name: str, cls: type[MethodKind]) -> None:
        super().add(name, cls)
        self.instances[name] = cls()

    def unknown(self, name: str) -> str:
        return f"no method kind {name!r}{suggest(name, self.entries)}; registered: {', '.join(sorted(self.entries))}"

    def get(self, name: str) -> MethodKind:  # type: ignore[override]  # the kind's instance
        super().get(name)  # an unknown name: the one-line KindError
        return self.instances[name]


REGISTRY = Registry()
