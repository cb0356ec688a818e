"""Training code behind the known-membership ground truth (tiny GPT-2 / BERT, contamination-study pieces)."""
