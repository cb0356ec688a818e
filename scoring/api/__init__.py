"""Black-box scoring: token statistics from a served model's OpenAI-compatible `/v1/completions` endpoint.

  client.py       ApiConfig (what the user asked for) and CompletionsClient (HTTP with bounded concurrency, a
                  requests-per-second limit, retries with backoff and jitter; the key is never logged)
  echo.py         one call per window: the prompt echoed back with its log-probabilities (the default)
  logit_bias.py   for servers without echo: per position, top-n log-probabilities plus `logit_bias`, with the
                  probe that picks the extraction method (exact inversion, direct read, or the seed's search)
  scorer.py       ApiScorer: the local Scorer's interface (windows, stats columns, per-row errors) over HTTP
  loopback.py     a stdlib server on 127.0.0.1 serving a local Hugging Face model the same way (tests, benches,
                  the contamination study's --via-api)
"""
