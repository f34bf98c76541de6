"""cscore's Hydra configs. Importing this package (Hydra does, for ``pkg://cscore.conf``) stores
the schema's defaults in the ConfigStore (``schema/...``), which the YAML presets build on."""

from cscore.run.typed import register

register()
