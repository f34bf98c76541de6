"""The errors a user can fix: the CLI prints their one-line message and exits with their ``exit_code``
(2: what the user gave is wrong; 1: anything else). Every other exception is a bug and keeps its traceback."""


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
    """A hypothesis whose tokens cannot be placed on its text (cross-family units)."""


class StorageError(CscoreError):
    """A place cscore writes cannot take the write (full disk, read-only, no permission, a file for a folder)."""


class ShardsPending(CscoreError):
    """A sharded pass whose shards are not all done: this process did its part (exit 0). ``missing``: the
    shard indices still to run ([] where another process finishes)."""

    exit_code = 0

    def __init__(self, message: str, missing: list[int], count: int):
        super().__init__(message)
        self.missing, self.count = list(missing), count
