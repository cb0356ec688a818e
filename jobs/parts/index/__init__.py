"""`tidemark index-corpus` and its readers: shards built on the workers, read and searched in batches (`overlap --index`, `trace`)."""
