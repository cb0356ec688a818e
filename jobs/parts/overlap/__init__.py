"""`tidemark overlap`: corpus parts streamed against a benchmark's n-grams (also the audit's, the index's and the
corpus recipe's scan), and `--semantic`'s corpus parts embedded on the scoring pool, with the driver's merge of each
item's nearest windows."""
