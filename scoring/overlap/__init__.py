"""Model-free contamination evidence: word n-grams hashed and matched in bulk (ngrams), the benchmark and corpus
sides of a scan and the answer per row (matching), and the reported shares with intervals (summary). Pure compute:
the corpus is read and scanned on the workers by jobs/parts/overlap/corpus_scan.py."""
