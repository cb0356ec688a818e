"""`tidemark overlap`: corpus parts streamed against a benchmark's n-grams (also the audit's, the index's and the corpus recipe's scan)."""
