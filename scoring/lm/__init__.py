"""A local model turned into the token-stats table: loading, the scorer, token stats, views, masked LM, neighbours."""
