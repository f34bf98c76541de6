"""The rows a discriminator of ``cscore cdm train`` was trained on, recorded with it
(``cscore_discriminator.json``: ``trained_rows``) so that ``cscore run method=cdm_gen`` leaves them
out of scoring, as a held-out evaluation must.

A row is named by its id and a digest of its group and text (the positive's text: the hypothesis,
or a reference), so a row counts as trained on only where the scored data holds the very same
text under the same id and group: the same data under another config name matches, another data
set whose ids happen to agree does not. Only the positives of the train groups are training rows;
the held-out groups' positives and every negative (not a row of any data) are not."""

from __future__ import annotations

import hashlib

import numpy as np

KEY = "trained_rows"  # the discriminator record's section


def row_digest(group, text) -> str:
    return hashlib.sha256(f"{group}\0{text}".encode()).hexdigest()[:16]


def trained_rows(items: list[dict], held: np.ndarray, data: dict | None) -> dict:
    """The record of the training rows: ``data`` (the generate run's data section, for the reader),
    ``rows`` {id: digest} of the positives outside the held-out groups."""
    rows = {str(i["id"]): row_digest(i["group"], i["text"]) for i, h in zip(items, held)
            if i["label"] == 1 and not h}
    return {"data": data, "n": len(rows), "rows": rows}


def trained_mask(record: dict, examples) -> np.ndarray:
    """True for each row of ``examples`` (id, group, hypothesis) the discriminator was trained on."""
    rows = record.get("rows") or {}
    return np.array([rows.get(str(i)) == row_digest(g, h)
                     for i, g, h in zip(examples["id"], examples["group"], examples["hypothesis"])], dtype=bool)
