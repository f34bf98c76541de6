"""cscore's version, in a module of its own so that it is read without importing the package root."""

__version__ = "0.1.0"
