"""`tidemark trace`: its inputs, the rounds on an index's parts, the tables merged on the driver."""
