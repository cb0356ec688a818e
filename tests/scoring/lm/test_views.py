"""strip_prefixes: the Arrow-level removal of the ReCaLL prefix from scored rows equals the row-wise rule."""
from __future__ import annotations

import pyarrow as pa

from jobs.plane.tasks import SCORED_SCHEMA
from scoring.lm.tokenstats import TOKEN_STATS_SCHEMA
from scoring.lm.views import ORIGINAL, PREFIXED, strip_prefix, strip_prefixes


def scored_row(i, view, ids, prefix_len, first):
    n = len(ids) - first
    row = {f.name: None for f in SCORED_SCHEMA}
    row.update(id=str(i), view=view, token_ids=ids, first_predicted=first, prefix_len=prefix_len,
               lp=[-1.0 * (k + 1) for k in range(n)], lp_max=[0.0] * n, mu=[-2.0] * n, sigma=[1.0] * n,
               entropy=[0.5] * n)
    return row


def test_strip_prefixes_equals_the_row_wise_rule_in_order():
    rows = [scored_row(0, ORIGINAL, [5, 6, 7], None, 1),
            scored_row(0, PREFIXED, [1, 2, 3, 5, 6, 7], 3, 3),  # prefix [1, 2, 3], stats for 5, 6, 7
            scored_row(1, ORIGINAL, [8, 9], 0, 1),
            scored_row(1, PREFIXED, [1, 2, 3, 8, 9], 3, 3),
            scored_row(2, PREFIXED, [4, 4], 0, 1)]  # no prefix recorded: left alone
    table = pa.Table.from_pylist(rows, schema=SCORED_SCHEMA)
    got = strip_prefixes(table, TOKEN_STATS_SCHEMA)
    want = []
    for r in rows:
        r = dict(strip_prefix(r))
        r.pop("prefix_len")
        want.append(r)
    assert got.schema == TOKEN_STATS_SCHEMA
    assert got.to_pylist() == pa.Table.from_pylist(want, schema=TOKEN_STATS_SCHEMA).to_pylist()
    assert got.column("token_ids").to_pylist()[1] == [5, 6, 7] and got.column("first_predicted")[1].as_py() == 0

    plain = pa.Table.from_pylist([rows[0], rows[2]], schema=SCORED_SCHEMA)  # nothing to strip: columns only
    assert strip_prefixes(plain, TOKEN_STATS_SCHEMA).column("token_ids").to_pylist() == [[5, 6, 7], [8, 9]]
