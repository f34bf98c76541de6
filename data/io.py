"""The one place data files are read (text, JSON, JSONL, parquet, pickles), with errors that say where."""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from cscore.data.schema import DataError


def decode(raw: bytes, label) -> str:
    """UTF-8 text (a leading byte-order mark removed); invalid bytes are a DataError naming the line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(f"{label}:{line}:{column}: not valid UTF-8: byte 0x{raw[err.start]:02x} ({err.reason}); "
                        "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def read_text(file: Path) -> str:
    try:
        return decode(Path(file).read_bytes(), file)
    except OSError as err:
        raise DataError(f"{file}: cannot read ({err.strerror or err})") from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON writes half of a UTF-16 pair


def lone_surrogate(value, path: str = "") -> str | None:
    """The dotted path of the first string (or key) in ``value`` holding a lone UTF-16 surrogate, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "(the value)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        here = f"{path}.{key}" if path else str(key)
        found = lone_surrogate(key, here) if isinstance(key, str) else None
        found = found or lone_surrogate(item, here)
        if found:
            return found
    return None


def check_text(value, where, raw: str | None = None) -> None:
    """A DataError naming the field that holds a lone surrogate (``raw``: the JSON text, scanned first)."""
    if raw is not None and not _SURROGATE_ESCAPE.search(raw):
        return
    try:
        field = lone_surrogate(value)
    except RecursionError:
        raise DataError(f"{where}: the data is nested too deeply to read") from None
    if field:
        raise DataError(f"{where}: field {field!r} holds a lone UTF-16 surrogate (an unpaired \\udXXX escape); "
                        "it is not text")


def loads(text: str, file, line_no: int | None = None):
    """``json.loads`` of a whole file, or of its line ``line_no`` (JSONL), with errors that say where."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        line = err.lineno if line_no is None else line_no
        message = f"{file}:{line}:{err.colno}: not valid JSON: {err.msg}: line {line} column {err.colno}"
        if text and (err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string")):
            message += " (the text ends there: is it truncated?)"
        raise DataError(message) from None
    except (ValueError, RecursionError) as err:  # an integer of > 4300 digits; nesting deeper than the stack
        raise DataError(f"{file}{'' if line_no is None else f':{line_no}'}: not usable JSON: {err}") from None


def read_json(file: Path):
    text = read_text(file)
    value = loads(text, file)
    check_text(value, file, text)
    return value


def iter_jsonl(file: Path) -> Iterator[tuple[str, dict]]:
    """(where = "<file>:<line>", record) of every non-blank line, split on "\\n" only (not U+2028)."""
    for line_no, line in enumerate(read_text(file).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        where = f"{file}:{line_no}"
        rec = loads(line, file, line_no)
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        check_text(rec, where, line)
        yield where, rec


def read_parquet(file: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq

        pq.read_table(file).validate(full=True)  # invalid UTF-8 in a string column fails here, not on first use
        return pd.read_parquet(file)
    except Exception as err:  # pyarrow's errors (OSError, ValueError ...), pandas' on damaged metadata (TypeError ...)
        detail = " ".join(str(err).split())  # pyarrow's messages span lines
        raise DataError(f"{file}: not a readable parquet file ({type(err).__name__}: {detail})") from None


class RefusingUnpickler(pickle.Unpickler):
    """Loads plain containers (dict, list, str, int, float ...) only: any global is refused."""

    def __init__(self, fh, file):
        super().__init__(fh)
        self.file = file

    def find_class(self, module, name):
        raise DataError(f"{self.file}: refused to unpickle: the pickle asks for the global {module}.{name}; "
                        "only plain data (dicts, lists, strings, numbers) is accepted. Use the JSONL conversion.")

    def persistent_load(self, pid):
        raise DataError(f"{self.file}: refused to unpickle: the pickle uses a persistent id ({pid!r})")


def read_pickle(file: Path):
    """A pickle of plain data, read with ``RefusingUnpickler`` (nothing in it can run)."""
    with open(file, "rb") as fh:
        try:
            value = RefusingUnpickler(fh, file).load()
        except DataError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
                OverflowError, MemoryError, RecursionError) as err:
            # what truncated or corrupt pickles raise (a corrupt length can ask for any amount of memory)
            detail = str(err) or "a length in it is larger than the memory (corrupt?)"
            raise DataError(f"{file}: not a readable pickle ({type(err).__name__}: {detail})") from None
    check_text(value, file)
    return value


def import_datasets(what: str):
    """The ``datasets`` package; a DataError saying how to install it when it is missing."""
    try:
        import datasets
    except ImportError:
        raise DataError(f"{what} needs the 'datasets' package: pip install datasets") from None
    return datasets
