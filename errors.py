"""The errors a user can fix: the CLI prints their one-line message (no traceback).

Anything else is a bug and keeps its traceback. ``CSCORE_DEBUG=1`` shows tracebacks for these too."""


class CscoreError(Exception):
    """Base of every user-fixable error (bad config, data, model spec, cache, cluster)."""


class ConfigError(CscoreError, ValueError):
    """A composed config value that is missing, of the wrong type or out of range."""


class KindError(CscoreError):
    """A method kind registered twice, under no name, or not a MethodKind (scorers/kinds)."""
