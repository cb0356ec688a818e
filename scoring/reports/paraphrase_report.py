"""`paraphrase`'s report.md, from the manifest it writes beside the data and the first changed rows
(jobs/commands/paraphrase.py writes it)."""
from __future__ import annotations

from typing import Mapping, Sequence


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def report_markdown(m: Mapping, examples: Sequence[Mapping], out: str, seconds: float, *, n_examples: int,
                    example_chars: int) -> str:
    """report.md: the manifest `m` (source, rewriter, rate, seed, measured shares, counts) and the `examples` (the
    first `n_examples` changed rows, texts cut at `example_chars`), for the paraphrase written to `out`."""
    rw, meas, n = m["rewriter"], m["measured"], m["counts"]
    source = (f"{rw['wordnet']['name']} {rw['wordnet']['version']}, from {rw['wordnet']['source']}"
              if rw["kind"] == "wordnet" else f"masked LM at `{rw['path']}`")
    reasons = ", ".join(f"{k}: {v}" for k, v in n["reasons"].items()) or "none"
    lines = ["# Tidemark paraphrase", "",
             f"- source `{m['source']['benchmark']}` → `{out}` (evaluate it with `tidemark evaluate --benchmark {out}`)",
             f"- rewriter `{rw['spec']}` ({source}); rate {m['rate']:g}, seed {m['seed']}",
             f"- measured: **{_pct(meas['changed_over_content_words'])} of content words changed** "
             f"({meas['changed']:,} of {meas['content_words']:,}; the rate asked for {meas['targeted']:,}), "
             f"{_pct(meas['changed_over_words'])} of all words; {meas['rows_changed']:,} of {meas['rows']:,} rows "
             "changed",
             f"- rows: {n['rows_in']:,} in = {n['rows_written']:,} written + {n['rows_quarantined']:,} quarantined "
             f"({reasons}; `quarantine.parquet/`)", f"- {seconds} s", "",
             "## Per bucket", "", "| bucket | rows | words | content words | changed | changed / content | "
             "changed / all |", "|---|---|---|---|---|---|---|"]
    for b, c in meas["per_bucket"].items():
        lines.append(f"| {b} | {c['rows']} | {c['words']} | {c['content_words']} | {c['changed']} | "
                     f"{_pct(c['changed_over_content_words'])} | {_pct(c['changed_over_words'])} |")
    lines += ["", f"## Examples (the first {n_examples} rows with a change; texts cut at {example_chars} characters)"]
    for e in examples:
        swaps = ", ".join(f"{a} → {b}" for a, b in e["swaps"])
        lines += ["", f"### `{e['id']}`", "", f"- before: {e['before']}", f"- after: {e['after']}",
                  f"- swaps: {swaps}"]
    return "\n".join(lines) + "\n"
