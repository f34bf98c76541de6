"""The console's log lines (``conf/hydra/job_logging/cscore.yaml``): the message alone, a warning or an
error with its level in front; run.log keeps the full record."""

from __future__ import annotations

import logging


class ConsoleFormatter(logging.Formatter):
    """``message`` below WARNING, ``WARNING: message`` / ``ERROR: message`` from it up."""

    def __init__(self) -> None:
        super().__init__("%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"{record.levelname}: {text}" if record.levelno >= logging.WARNING else text
