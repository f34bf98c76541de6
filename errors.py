"""The errors a user can fix: the CLI prints their one-line message and exits with their ``exit_code``:
2 for what the user gave (config, usage, data), 1 for the rest (model, storage, memory, cache).
Anything else is a bug and keeps its traceback (``CSCORE_DEBUG=1``: these too). Ctrl-C exits 130."""


class CscoreError(Exception):
    """Base of every user-fixable error (bad config, data, model spec, cache, cluster)."""

    exit_code = 1


class ConfigError(CscoreError, ValueError):
    """A composed config value that is missing, of the wrong type or out of range."""

    exit_code = 2


class DataError(CscoreError, ValueError):
    """A dataset that cannot be used as given (the message says where and why)."""

    exit_code = 2


class InputError(CscoreError, ValueError):
    """A scoring input that cannot be scored as given (clear message, item index included)."""


class ModelSpecError(InputError):
    """A model spec (``pair.*.path``) that names nothing loadable; the message is one line."""


class OutOfMemory(CscoreError):
    """Even the smallest batch (one item) does not fit the device."""


class CacheError(CscoreError):
    """A cache request that cannot be done, e.g. a key prefix that matches no entry, or several."""


class CacheEntryError(CacheError):
    """A cache entry failed verification."""


class SlurmError(CscoreError, RuntimeError):
    """SLURM refused or failed something cscore handed it (one-line message)."""


class SlurmUnavailable(SlurmError):
    """SLURM's client commands are missing, or the controller does not answer."""


class KindError(CscoreError):
    """A method kind registered twice, under no name, or not a MethodKind (run/kinds)."""


class AlignmentError(InputError):
    """A hypothesis whose tokens cannot be placed on its text (one line, item index included)."""


class StorageError(CscoreError):
    """A place cscore writes cannot take the write (full disk, read-only, no permission, a file in the way)."""


class ShardsPending(CscoreError):
    """A sharded pass (``runtime.shards``) whose shards are not all done yet: this process did its
    part; the run is not complete. ``missing``: the shard indices still to run ([] where another
    process finishes: a worker's parent) (exit 0: a shard of a job array or a worker that did its
    part did not fail)."""

    exit_code = 0

    def __init__(self, message: str, missing: list[int], count: int):
        super().__init__(message)
        self.missing, self.count = list(missing), count
