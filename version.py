"""cscore's version, in a module of its own: the signature and the run directory record it without
importing the package root (whose lazy re-export reaches into ``scorers``)."""

__version__ = "0.1.0"
