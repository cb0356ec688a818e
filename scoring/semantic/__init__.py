"""Semantic overlap (issue 57): the corpus passages that say what a benchmark item says in other words (a rephrase, a
translation), which the verbatim 13-gram scan of scoring/overlap passes as clean. Pure compute: corpus documents
cut into windows sized to the items (windows), sentence embeddings (embed; tiny builds a small model for tests and
demos), exact cosine top-k that merges across corpus parts (search), the anchors that survive a rephrase (anchors)
and the model-free check of a candidate against them (verify), the threshold set on a null (calibrate), an
item's decision over its candidates (decide), and the optional LLM judge's prompts and verdicts (judge).
The corpus is read and embedded on the workers by jobs/; nothing here imports Ray or writes a file."""
