"""Paraphrased copies of a benchmark: the rewriters and the WordNet database reader."""
