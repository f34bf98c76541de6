"""The run pipeline: the layer between the commands (``cli/``) and ``scorers``, ``data``, ``metaeval``
(stages, variants, the method kinds; its modules: docs/architecture.md)."""
