"""The token statistics kind (methods with the default ``kind = "token"``: single, contrast, cdm, ...); its
steps: ``token_pass.TokenKind``."""

from __future__ import annotations

from cscore.run.kinds.base import REGISTRY
from cscore.run.kinds.token_pass import TokenKind


@REGISTRY
class Token(TokenKind):
    name = "token"
    sections = ("units",)  # "aligned" for a cross-family pair (methods on aligned units)
