"""`tidemark doc-mia`: document parts on the scoring pool and the feature grid made on the workers."""
