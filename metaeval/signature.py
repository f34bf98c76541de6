"""The signature printed under every table, sacrebleu style: ``key:value`` fields joined by ``|``
(``data:demo|n:160|...|version:0.1.0``), cscore's version last; ``Signature.parse`` reads one back."""

from __future__ import annotations

from dataclasses import dataclass, field

from cscore.version import __version__

SEP = "|"


@dataclass(frozen=True)
class Signature:
    fields: dict = field(default_factory=dict)  # ordered: the order they are printed in

    def __str__(self) -> str:
        items = {**{k: v for k, v in self.fields.items() if k != "version"}, "version": __version__}
        return SEP.join(f"{k}:{_clean(v)}" for k, v in items.items())

    @classmethod
    def parse(cls, text: str) -> "Signature":
        out = {}
        for part in text.strip().split(SEP):
            key, colon, value = part.partition(":")
            if not colon or not key:
                raise ValueError(f"not a cscore signature field: {part!r} in {text!r}")
            out[key] = value
        return cls(out)


def _clean(value) -> str:
    text = "-" if value is None else str(value)
    return text.replace(SEP, "/").replace("\n", " ")
