"""From a model's words back to the corpus documents they occur in (`tidemark trace`): the maximal spans of a text
found verbatim in a corpus index, ranked by rarity (spans), and the documents behind them ranked by relevance to the
whole text (ranking). Pure functions; jobs/parts/trace_* ask the index."""
