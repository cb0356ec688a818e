"""Text-only audits: detectors that need nothing from a model but the text it generates (a hosted chat API, a
completions endpoint without prompt log-probabilities).

    benchmark row ──▶ prompt kinds (kinds.py: continuation, paraphrase, decop, name_cloze) plan requests
                  ──▶ the runner (runner.py) sends them through the served-model client (scoring/api/client.py:
                      retries, rate limit, adaptive concurrency), reusing answers a journal already holds
                  ──▶ generations table (requests.py: GENERATIONS_SCHEMA), one row per generated sample
                  ──▶ detectors (scoring/detectors/{ngram_coverage,samia,decop,name_cloze}.py): pure functions of
                      a row's generations, registered with `input="generations"`; scores.py turns a generations
                      table into score columns, for `evaluate` and for `rescore --generations` alike.

Nothing here imports Ray or writes a file: the jobs layer (jobs/parts/text_only/generation.py) runs it on the scoring
pool's actors and writes the parts.
"""
