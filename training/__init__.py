"""Training and artifact making behind the stage commands (the CLI composes, checks, calls, prints):

  artifacts      the artifact directory: identity, refusal of another config, the identity JSON
                 written last (atomically) to mark it finished; versions, digests, the group split
  negatives      ``cscore cdm generate``: positives -> negatives.jsonl + provenance.json
  discriminator  ``cscore cdm train``: the items, the held-out split, the pooler or the classifier
  classifier     the transformers sequence classifier a discriminator can be (train, log-odds)
  t5score        T5Score's ranking pairs, Eq. 3 loss, the training recipe and loop
  t5score_job    ``cscore t5score train``: pairs from a table, train, measure, save"""
