"""The build's steps over document rows: typed filters, the pipeline, dedup, sampling, counts."""
