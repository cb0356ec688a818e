"""Documents whose text is made on request (curation/document.Deferred, a source's TEXT_ON_REQUEST): annotated by
pipeline.annotate_documents exactly as their full documents are by annotate_records (the definition), whichever
stage drops them; Stack Exchange defers only bodies that body_text cannot fail on."""
from __future__ import annotations

import html
import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from curation import sources
from curation.config import load_config
from curation.document import Deferred
from curation.sources.stackexchange import posts as se_posts
from curation.stages.pipeline import (annotate_documents, annotate_records, document_row, from_record,
                                      numbered_records, to_record)

WINDOWS = [("2015-02-01", "2015-03-01"),  # the tests' coffee window: most questions cut off by date
           ("2016-01-01", "2016-02-01"),  # every question a member candidate: every text needed
           ("2010-01-01", "2030-01-01")]  # every question between the cutoffs: no text needed


def config(path: Path, member_before: str, nonmember_after: str, *extra: str) -> dict:
    root = Path(__file__).resolve().parents[3]
    return load_config(root / "jobs" / "configs" / "stackmia.yaml", [
        f"source.path={path}", f"cutoffs.member_before={member_before}", f"cutoffs.nonmember_after={nonmember_after}",
        *extra])


def by_definition(cfg: dict) -> pa.Table:
    documents = sources.iter_documents(sources.source_config(cfg))
    return annotate_records(list(numbered_records(documents)), cfg)


def deferred(cfg: dict, batch_size: int = 256) -> pa.Table:
    documents = sources.iter_documents(sources.source_config(cfg), deferred=True)
    return pa.concat_tables(list(annotate_documents(documents, cfg, batch_size=batch_size)))


@pytest.mark.parametrize("window", WINDOWS)
def test_the_coffee_dump_annotates_the_same_deferred(shared_data: Path, window):
    cfg = config(shared_data / "stackexchange" / "coffee.stackexchange.com", *window)
    expected = by_definition(cfg)
    assert expected.num_rows == 225
    assert deferred(cfg).equals(expected)
    assert deferred(cfg, batch_size=7).equals(expected)


def _row(**attrs: str) -> str:
    escaped = {k: html.escape(v, quote=True).replace("\n", "&#xA;") for k, v in attrs.items()}
    return "  <row " + " ".join(f'{k}="{v}"' for k, v in escaped.items()) + " />"


# A character reference to a control character in a block element's tail makes body_text raise ValueError (lxml
# refuses it as text), which quarantines the question as a bad row whatever its date.
FAILING_BODY = "<p>x</p>&#x1;<br>z"


def write_site(tmp_path: Path) -> Path:
    rows = [
        _row(Id="1", PostTypeId="1", CreationDate="2015-01-10T08:00:00.000", Title="Member question",
             Body="<p>I bought fresh beans and wonder where they should go, and for how long.</p>" * 3),
        _row(Id="2", PostTypeId="1", CreationDate="2015-02-10T08:00:00.000", Title="Between the cutoffs",
             Body=FAILING_BODY),
        _row(Id="3", PostTypeId="1", CreationDate="2015-01-11T08:00:00.000", Title="Failing member",
             Body=FAILING_BODY),
        _row(Id="4", PostTypeId="1", CreationDate="2015-02-11T08:00:00.000", Title="Cut off, plain body",
             Body="<p>a plain body</p>", Score="not a number"),
        _row(Id="5", PostTypeId="1", CreationDate="2015-03-11T08:00:00.000", Title="Non-member with code",
             Body="<p>see</p><pre><code>x = 1</code></pre>", Tags="<a><b>"),
        _row(Id="6", PostTypeId="2", ParentId="1", CreationDate="2015-03-02T00:00:00.000", Body="<p>late</p>"),
    ]
    path = tmp_path / "beans.stackexchange.com" / "Posts.xml"
    path.parent.mkdir(parents=True)
    path.write_text('<?xml version="1.0" encoding="utf-8"?>\n<posts>\n' + "\n".join(rows) + "\n</posts>\n",
                    encoding="utf-8")
    return path.parent


def test_a_body_that_fails_is_a_bad_row_whatever_its_date(tmp_path: Path):
    with pytest.raises(ValueError):
        se_posts.body_text(FAILING_BODY)
    cfg = config(write_site(tmp_path), "2015-02-01", "2015-03-01")
    expected = by_definition(cfg)
    reasons = dict(zip(expected.column("id").to_pylist(), expected.column("reason").to_pylist()))
    assert reasons == {"stackexchange:beans:1": "member_active_after_cutoff", "stackexchange:beans:2": "bad_row",
                       "stackexchange:beans:3": "bad_row", "stackexchange:beans:4": "bad_row",
                       "stackexchange:beans:5": "has_code"}
    assert deferred(cfg).equals(expected)


def test_only_bodies_without_character_references_are_deferred():
    row = {"Id": "9", "PostTypeId": "1", "CreationDate": "2015-01-10T08:00:00.000", "Title": "T",
           "Body": "<p>plain &amp; simple</p>"}
    item = se_posts.question_document(row, "beans.stackexchange.com", None, deferred=True)
    assert isinstance(item, Deferred) and item.head["text"] == "" and "has_code" not in item.head["meta"]
    full = se_posts.question_document(row, "beans.stackexchange.com", None)
    assert item.rest() == (full["title"], full["text"], {k: full["meta"][k] for k in ("has_code", "has_formula")})
    assert {**item.head, "title": full["title"], "text": full["text"]} == {**full, "meta": item.head["meta"]}
    referenced = {**row, "Body": "<p>it&#39;s here</p>"}
    assert not isinstance(se_posts.question_document(referenced, "beans.stackexchange.com", None, deferred=True),
                          Deferred)


class _Flag(int):
    pass


@pytest.mark.parametrize("meta", [
    {}, {"b": 1, "a": "x", "c": None, "d": True, "e": [1, "y", None, False], "f": (2, 3), "g": {"z": 1, "y": [{}]}},
    {"score": -0.0, "share": 0.1 + 0.2, "big": 2 ** 80, "text": "caf\u00e9 \ud800 \x00"},
    {"when": datetime(2015, 1, 2, tzinfo=timezone.utc)}, {"nan": float("nan")}, {"inf": [float("inf")]},
    {1: "int key"}, {"flag": _Flag(1)}, {"nested": {"when": date(2015, 1, 2)}}, {"set": {1, 2}},
])
def test_a_row_is_the_records_round_trip(meta):
    doc = {"id": 7, "source": "s", "title": None, "text": "t", "url": "u", "meta": meta,
           "created_at": datetime(2015, 1, 2, 3, 4, 5, 600, tzinfo=timezone(timedelta(hours=2)))}
    record = to_record(doc)
    expected = from_record(record)
    row, created_at = document_row(doc)
    assert created_at == record["created_at"]
    assert json.dumps(row, sort_keys=True, default=repr) == json.dumps(expected, sort_keys=True, default=repr)
    assert list(row["meta"]) == list(expected["meta"])
    assert repr(row) == repr(expected) or "nan" in repr(expected)  # nan != nan, and repr shows the same text
