"""The numbers users read from scores: evaluation metrics, AUC CIs, proportions, comparisons."""
