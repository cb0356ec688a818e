"""A fake MediaWiki API over the versions fixtures (tests/fixtures/mediawiki/versions/), two ways: `HistoryFetch`, a
`fetch(params) -> dict` to inject (tests/curation/sources/test_wikipedia_versions.py), and `MediaWikiServer`, the
same answers over real HTTP on 127.0.0.1 (a stdlib server on a free port, started and always stopped) for the code
that builds its own client from a recipe's `source.api` (tests/jobs/commands/test_cutoff_config.py).

The fixtures hold the category listing as {"request", "response"} and one file per page: its revision history and
the `action=parse` bodies by revid, in the API's formatversion=2 shapes. Revision queries are answered from the
history the way the API does (rvdir=older from rvstart: the latest revision at or before it; rvdir=newer: the
first), with the `continue` object the API adds when there are more revisions that way.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from curation.io.http import HttpError

VERSIONS = Path(__file__).resolve().parent / "fixtures" / "mediawiki" / "versions"


class HistoryFetch:
    """A `fetch(params) -> dict` over the fixture histories; records every request. `fail(params)` returning true
    makes that request raise HttpError (a request that failed for good)."""

    def __init__(self, reverse_listing: bool = False, fail=None):
        self.listing = json.loads((VERSIONS / "categorymembers_example_places.json").read_text())
        if reverse_listing:
            members = self.listing["response"]["query"]["categorymembers"]
            self.listing["response"]["query"]["categorymembers"] = members[::-1]
        self.pages = {p["pageid"]: p for p in (json.loads(f.read_text()) for f in sorted(VERSIONS.glob("page_*")))}
        self.fail, self.calls = fail, []
        self._lock = threading.Lock()  # the server answers from several threads

    def __call__(self, params) -> dict:
        with self._lock:
            self.calls.append(dict(params))
        assert params["format"] == "json" and params["formatversion"] == 2 and params["maxlag"] == 5
        if self.fail and self.fail(params):
            raise HttpError("HTTP 503 (gave up after 5 attempts)", 503)
        if params.get("list") == "categorymembers":
            assert {k: params[k] for k in self.listing["request"]} == self.listing["request"]
            return self.listing["response"]
        if params["action"] == "parse":
            assert "pageid" not in params and params["prop"] == "text|revid"
            return next(p["parse"][str(params["oldid"])] for p in self.pages.values()
                        if str(params["oldid"]) in p["parse"])
        assert params["prop"] == "revisions" and params["rvlimit"] == 1 and params["rvprop"] == "ids|timestamp"
        page = self.pages[params["pageids"]]
        revs = page["revisions"]
        hits = revs if params["rvdir"] == "newer" else [r for r in revs[::-1] if r["timestamp"] <= params["rvstart"]]
        body = {"batchcomplete": True, "query": {"pages": [
            {"pageid": page["pageid"], "ns": 0, "title": page["title"], **({"revisions": hits[:1]} if hits else {})}]}}
        if len(hits) > 1:  # more revisions that way: the API says so, and the crawl does not follow it
            stamp = "".join(c for c in hits[1]["timestamp"] if c.isdigit())
            body = {"continue": {"rvcontinue": f"{stamp}|{hits[1]['revid']}", "continue": "||"}, **body}
        return body

    def count(self, **match) -> int:
        return sum(all(c.get(k) == v for k, v in match.items()) for c in self.calls)


def query_params(query: str) -> dict:
    """A GET query string as the params the client sent: all-digit values back to ints (requests writes ints as
    their digits; no fixture value is an all-digit string)."""
    return {k: int(v) if v.isdigit() else v for k, v in parse_qsl(query, keep_blank_values=True)}


class MediaWikiServer:
    """`HistoryFetch`'s answers over HTTP: GET <url>?<params> -> the JSON body. An HttpError from `fail` is answered
    with its status; anything else that goes wrong (a request the fixtures do not expect) is recorded in `errors`
    and answered 400, which the client does not retry. `user_agents`: the header of every request.

        with MediaWikiServer() as wiki:
            recipe["source"]["api"] = wiki.url
    """

    def __init__(self, fetch: HistoryFetch | None = None, path: str = "/w/api.php"):
        self.fetch = fetch or HistoryFetch()
        self.path = path
        self.errors: list[str] = []
        self.user_agents: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def calls(self) -> list[dict]:
        return self.fetch.calls

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    def _answer(self, target: str) -> tuple[int, dict]:
        parts = urlsplit(target)
        if parts.path != self.path:
            return 404, {"error": {"code": "notfound", "info": parts.path}}
        try:
            return 200, self.fetch(query_params(parts.query))
        except HttpError as exc:
            return exc.status or 500, {"error": {"code": "http", "info": str(exc)}}
        except Exception as exc:  # noqa: BLE001 - an unexpected request: the test reads `errors`
            self.errors.append(f"{target}: {type(exc).__name__}: {exc}")
            return 400, {"error": {"code": "unexpected", "info": str(exc)}}

    def __enter__(self) -> "MediaWikiServer":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                fake.user_agents.append(self.headers.get("User-Agent", ""))
                status, body = fake._answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-mediawiki", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
