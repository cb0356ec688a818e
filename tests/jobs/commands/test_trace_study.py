"""The trace study, small (bench/trace_study.QUICK, ~2.5 minutes): a tiny GPT-2 trained 40 times on 10 documents
continues their openings, and `tidemark trace` leads the continuations back to those documents; a control model
that never read them reproduces no span of theirs past the common-phrase level."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.heavy
pytest.importorskip("pydivsufsort")


def test_continuations_are_traced_to_the_documents_the_model_was_trained_on(tmp_path):
    from bench.trace_study import QUICK, run_study

    res = run_study(QUICK, tmp_path)
    target, control = res["target"], res["control"]
    assert target["recall_documents"] >= 0.8 and target["recall_texts"] >= 0.7
    assert target["precision"] >= 0.8
    assert target["median_longest"] >= 13
    assert control["longest_span_into_seen"] < 13  # at most a common phrase of the seen documents
    assert control["longest_span"] < target["median_longest"]
    assert control["max_rarity"] < max(e["rarity"] for e in target["examples"])
    # the control's common phrases (traced at 4 words) rank below most of the target's spans
    assert control["common"]["spans"] > 0 and target["rarer_than_every_control_span"] >= 0.8
