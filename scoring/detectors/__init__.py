"""Importing this package registers every detector (one module each)."""
from scoring.detectors import (  # noqa: F401 - imported for registration
    codec,
    con_recall,
    dc_pdd,
    decop,
    gradnorm,
    loss,
    lowercase,
    max_k,
    min_k,
    min_k_pp,
    name_cloze,
    neighbour,
    ngram_coverage,
    pac,
    recall,
    ref,
    samia,
    tag_tab,
    zlib_ratio,
)
from scoring.detectors.base import REGISTRY, Detector, Method, parse_method, parse_methods

__all__ = ["REGISTRY", "Detector", "Method", "parse_method", "parse_methods"]
