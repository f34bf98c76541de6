"""Datasets: loaders -> one validated example table (see ``schema``), plus prompts."""

from cscore.data.registry import LOADERS, load_config, load_examples  # noqa: F401
from cscore.data.schema import LoadReport, validate  # noqa: F401
