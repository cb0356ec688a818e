"""Stack Exchange questions from a data dump: reading (dump), parallel ranges, posts, the source."""
