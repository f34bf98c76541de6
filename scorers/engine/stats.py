"""Per-token sufficient statistics of one model on (prompt, hypothesis) items: per scored token and
temperature logp = log p_T(y_t) and logp_max = log max_v p_T(v) (a distributional pass also ``dist``),
stored flat: item i owns [offsets[i], offsets[i+1])."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cscore.errors import ConfigError

FORMAT_VERSION = 1
DIST_NAMES = ("entropy", "xent_ea", "xent_ae", "kl_ea", "kl_ae", "jsd")  # an expert head keeps the first only
ROW_NAMES = ("logp", "logp_max", *DIST_NAMES)  # a head's rows of one batch, in this order (a prefix of it)
DISTRIBUTIONAL_METHODS = "binoculars, divergence, dola and contrast with weight=jsd"


def exit_head(k: int) -> str:
    """The head of DoLa's candidate layer k in the expert's pass (``PassOptions.exits``)."""
    return f"layer_{int(k)}"


@dataclass
class TokenStats:
    # a cache payload (scorers.store.cache.Payload): the entries without a meta "kind"
    ENTRY_KIND: ClassVar[str | None] = None
    ENTRY_FORMAT: ClassVar[tuple[str, int] | None] = None
    ARRAY_NAMES: ClassVar[tuple[str, ...]] = ("temperatures", "offsets", "token_ids", "logp", "logp_max")
    OPTIONAL_ARRAYS: ClassVar[tuple[str, ...]] = DIST_NAMES

    temperatures: tuple[float, ...]
    offsets: np.ndarray  # int64 [n_items + 1]
    token_ids: np.ndarray  # int64 [n_tokens], the scored hypothesis tokens
    logp: np.ndarray  # float64 [n_temps, n_tokens]
    logp_max: np.ndarray  # float64 [n_temps, n_tokens]
    dist: dict[str, np.ndarray] = field(default_factory=dict)  # DIST_NAMES kept (a distributional pass)

    def __post_init__(self):
        self.temperatures = tuple(float(t) for t in self.temperatures)
        n_tok = int(self.offsets[-1])
        for name in ("logp", "logp_max", *self.dist):
            arr = self.dist[name] if name in self.dist else getattr(self, name)
            if arr.shape != (len(self.temperatures), n_tok):
                raise ValueError(f"{name} has shape {arr.shape}, expected {(len(self.temperatures), n_tok)}")
        if self.token_ids.shape != (n_tok,):
            raise ValueError("token_ids does not match offsets")

    @property
    def n_items(self) -> int:
        return len(self.offsets) - 1

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"temperatures": np.asarray(self.temperatures, dtype=np.float64), "offsets": self.offsets,
                "token_ids": self.token_ids, "logp": self.logp, "logp_max": self.logp_max, **self.dist}

    @classmethod
    def from_arrays(cls, arrays) -> TokenStats:
        return cls(tuple(arrays["temperatures"].tolist()), arrays["offsets"], arrays["token_ids"], arrays["logp"],
                   arrays["logp_max"], {n: arrays[n] for n in DIST_NAMES if n in arrays})

    def entry_figures(self) -> dict:
        """What a cache entry's meta.json says of it."""
        return {"temperatures": list(self.temperatures), "n_tokens": int(self.offsets[-1])}

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def _row(self, temperature: float) -> int:
        for i, t in enumerate(self.temperatures):
            if abs(t - float(temperature)) < 1e-9:
                return i
        raise ConfigError(
            f"temperature {temperature} was not computed; cached temperatures are {list(self.temperatures)}. "
            "Add it to stats.temperatures (this needs a new forward pass)."
        )

    def lp(self, temperature: float = 1.0) -> np.ndarray:
        """log p_T of every scored token (float64, flat)."""
        return self.logp[self._row(temperature)].astype(np.float64)

    def lp_max(self, temperature: float = 1.0) -> np.ndarray:
        """log of the largest probability in the distribution at each scored position."""
        return self.logp_max[self._row(temperature)].astype(np.float64)

    def statistic(self, name: str, temperature: float = 1.0) -> np.ndarray:
        """A distributional statistic (``DIST_NAMES``) of every scored token at ``temperature``."""
        if name not in self.dist:
            raise ConfigError(f"these statistics hold no {name!r} (a pass without the distributional statistics, "
                              f"or a head that has no expert beside it): {DISTRIBUTIONAL_METHODS} read them, "
                              "and a run of those methods computes them in its own pass")
        return self.dist[name][self._row(temperature)].astype(np.float64)

    def item(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))
