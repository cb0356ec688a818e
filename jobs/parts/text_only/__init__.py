"""Models that answer only in text: generation parts (journal, generations, scores) and the evaluation over them (`evaluate --api-logprobs none`, `cutoff`)."""
