"""trace's page and sentences: the headline's numbers, the evaluate report's "Traced to the corpus" sentence, and
untrusted passages escaped with their spans marked."""
from __future__ import annotations

import pyarrow as pa

from scoring.reports.generation_sections import trace_sentence
from scoring.reports.html import render
from scoring.reports.trace_page import char_spans, headline, report_page

REPORT = {"counts": {"rows_in": 3, "traced": 2, "quarantined": 1, "reasons": {"no_words": 1}},
          "summary": {"texts_with_span": 1, "spans": 1, "words": 20,
                      "share_with_span": [{"words": 8, "texts": 1, "share": 0.5}],
                      "longest_spans": [], "documents_cited_most": [{"doc_id": "d<1>", "texts": 1}]},
          "index": {"path": "idx", "documents": 10, "tokens": 100, "index_bytes": 1, "parts": 1, "text_store": True},
          "settings": {"min_words": 8, "docs_per_span": 10, "context_words": 4, "batch_texts": 1, "chunk_texts": 1},
          "runner": {"used": "local", "why": ""}, "seconds": 1.0, "seconds_per_text": 0.5}


def test_the_headline_and_the_evaluate_sentence_say_the_counts():
    assert headline(REPORT) == ("1 of 2 texts (50.0%) contain a span of at least 8 words that occurs verbatim in the "
                                "corpus, 1 such spans in all; the document cited by most texts is d<1> (1).")
    s = trace_sentence({"index": "idx", "out": "trace/", "texts": 4, "texts_with_span": 1, "spans": 3,
                        "min_words": 8, "seconds": 1})
    assert s.startswith("1 of 4 generated samples (25.0%) contain a span of at least 8 words") and "trace/" in s
    assert trace_sentence(None) == ""


def test_word_spans_become_character_spans():
    assert char_spans("Hello, big world!", [(1, 3)]) == [(7, 16)]


def test_passages_are_escaped_and_marked(tmp_path):
    text = "the <b>bold</b> claim here"
    spans = pa.Table.from_pylist([{"id": "t", "start": 0, "end": 4, "words": 4, "span": "the b bold b", "count": 1,
                                   "rarity": 9.0, "rank": 1, "doc_ids": ["d<1>"], "doc_offsets": [0],
                                   "doc_files": ["f"]}])
    docs = pa.Table.from_pylist([{"id": "t", "doc_id": "d<1>", "file": "f", "word_offset": 0, "doc_words": 9,
                                  "span_start": 0, "span_end": 4, "bm25": 1.0, "doc_rank": 1,
                                  "snippet": "x <script>the</script> y", "match_start": 2, "match_end": 23}])
    page = render(report_page(REPORT, [{"id": "t", "text": text}], spans, docs, tmp_path))
    assert "<script>" not in page and "<b>bold" not in page
    assert "<mark>the &lt;b&gt;bold&lt;/b</mark>&gt; claim" in page  # words: the, b, bold, b
    assert "&lt;script&gt;the&lt;/script&gt;" in page and "d&lt;1&gt;" in page
