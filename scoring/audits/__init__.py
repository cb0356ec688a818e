"""Corpus audits as pure pieces: snippet audits and calibration (corpus), dataset inference, doc-level MIA."""
