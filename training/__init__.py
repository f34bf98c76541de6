"""Training and artifact making behind the stage commands (``cscore cdm generate | train``,
``cscore t5score train``); the CLI composes, checks, calls, prints. Its modules: docs/architecture.md."""
