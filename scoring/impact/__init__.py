"""By how much did contamination inflate a benchmark score: which items leaked (splits), how leaked and clean items
score (stats), and how far a model's score sits above what its skill elsewhere predicts (ConStat). Pure functions
over per-item score arrays; `tidemark impact` reads the scores and writes the report."""
