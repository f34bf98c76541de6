"""The run pipeline: the layer between the commands (``cli/``) and ``scorers``, ``data``, ``metaeval``.

  kinds/       the method kinds (plan -> load -> score per kind) and what they share, by job
  variants.py  the variants one run scores (the method and the ``baselines.rows`` comparison rows)
  stages.py    the stages every run goes through: load the data, evaluate, write the run directory
  negatives.py ``cscore cdm generate``: the positives and the pair that writes their negatives"""
