"""The rows a ``cscore cdm train`` discriminator was trained on (the positives of its train groups, by id
and a digest of group and text), so that ``cscore run method=cdm_gen`` leaves them out of scoring."""

from __future__ import annotations

import hashlib

import numpy as np

KEY = "trained_rows"  # the discriminator record's section


def row_digest(group, text) -> str:
    return hashlib.sha256(f"{group}\0{text}".encode()).hexdigest()[:16]


def trained_rows(items: list[dict], held: np.ndarray, data: dict | None) -> dict:
    """The record of the training rows: ``data`` (the generate run's data section) and ``rows`` {id: digest}."""
    rows = {str(i["id"]): row_digest(i["group"], i["text"]) for i, h in zip(items, held)
            if i["label"] == 1 and not h}
    return {"data": data, "n": len(rows), "rows": rows}


def trained_mask(record: dict, examples) -> np.ndarray:
    """True for each row of ``examples`` (id, group, hypothesis) the discriminator was trained on."""
    rows = record.get("rows") or {}
    return np.array([rows.get(str(i)) == row_digest(g, h)
                     for i, g, h in zip(examples["id"], examples["group"], examples["hypothesis"])], dtype=bool)
