"""The ledger: per-part counts add up, and a part that does not reconcile is named."""
from __future__ import annotations

import pytest

from curation.io.ledger import Ledger, ReconcileError


def test_parts_sum_and_a_bad_part_is_named():
    parts = {1: {"records": 5, "documents": 3, "reasons": {"bad_json": 2}},
             0: {"records": 4, "documents": 4, "reasons": {}}}
    total = Ledger.of_parts(parts, rows_in="records", rows_out="documents", what="corpus part")
    assert (total.rows_in, total.rows_out, dict(total.reasons)) == (9, 7, {"bad_json": 2})
    parts[0]["documents"] = 3
    with pytest.raises(ReconcileError, match="corpus part 0"):
        Ledger.of_parts(parts, rows_in="records", rows_out="documents", what="corpus part")
