"""Names the report makes distinct: the keys in which settings differ, and repeated names numbered."""

from __future__ import annotations

import json


def differing(dicts: list[dict]) -> list[str]:
    """The keys whose values are not the same in all of ``dicts`` (a missing key counts as None), sorted."""
    keys = sorted({k for d in dicts for k in d})
    return [k for k in keys if len({json.dumps(d.get(k), sort_keys=True, default=str) for d in dicts}) > 1]


def numbered(names: list[str], mark: str = "_") -> list[str]:
    """``names`` with each repeat made distinct: ``_2``, ``_3``, ... (``mark`` before the number) in the order found."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}{mark}{seen[name]}")
    return out
