"""Document-level membership inference (Meeus et al., "Did the neurons read your book?"), Ray-free:

  stats.py          one windowed pass per document (context C, stride C−1) → lp, lp_max and, for GP, the mean
                    predicted distribution (jobs/parts/doc_mia/documents.py runs it on the scoring pool)
  normalization.py  NoNorm / RatioNorm / MaxNorm with TF or GP reference dictionaries (training folds only)
  features.py       AggFE and HistFE (equal-width bins fitted on the training folds)
  protocol.py       the random-forest meta-classifier and the k-fold protocol over the whole grid
"""
