"""Releases: `build-benchmark`'s parsed shards, global passes and dedup tasks, the corpus recipe's training overlap, `paraphrase`'s parts."""
