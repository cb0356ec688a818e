"""Text-only throughput (part of bench/generation_bench.py): the requests a text-only run sends for sampled
continuations (one seeded request per sample, as against a server that ignores `n`), sent to the loopback server
(its own process, one CPU thread) by

  - a plain sequential client loop: one keep-alive connection, one request after another (what the peer's
    generate script does against an API);
  - Tidemark's request runner (scoring/generation/runner.py, what each API actor runs) at concurrency 1, 4, 8;
  - the whole `tidemark evaluate --api-logprobs none` at concurrency 8 (Ray start-up, survey, plan, parts, report);

with no added latency (the server's own compute: one forward at a time, so concurrency only hides HTTP and JSON)
and with a simulated round trip (`--latency-s`, a remote API's: concurrency overlaps the waits). Every path sends
the same seeded requests, so their answers are checked equal.
"""
from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from pathlib import Path


def plain_loop(url: str, bodies: list[dict]) -> tuple[float, list[dict]]:
    """One request after another on one keep-alive connection."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    answers = []
    t0 = time.perf_counter()
    for body in bodies:
        conn.request("POST", u.path + "/completions", body=json.dumps({"model": "bench", **body}),
                     headers={"Content-Type": "application/json"})
        answers.append(json.loads(conn.getresponse().read()))
    seconds = time.perf_counter() - t0
    conn.close()
    return seconds, answers


def throughput(cfg: dict, work: Path, model_dir: str) -> dict:
    from bench.loopback_runs import evaluate, log, serve
    from bench.workspace import passages
    from scoring.api.client import ApiConfig, CompletionsClient
    from scoring.generation.kinds import Settings, first_phase, kind_key
    from scoring.generation.runner import RequestRunner
    from scoring.lm.model import load_tokenizer

    tok = load_tokenizer(model_dir)
    count = lambda t: len(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    rows = passages(cfg["throughput_rows"], cfg["words"], seed=21)
    settings = Settings(samples=cfg["throughput_samples"], n_ok=False)
    requests = [r for p in rows for r in first_phase(p["id"], p["text"], [kind_key("continuation", prefix=0.5)],
                                                        settings, count)[0]]
    bench = work / "throughput.jsonl"
    bench.write_text("".join(json.dumps({"id": p["id"], "input": p["text"], "label": i % 2}) + "\n"
                             for i, p in enumerate(rows)))
    out = {"rows": len(rows), "samples": settings.samples, "requests": len(requests), "runs": []}
    for latency in cfg["latency_s"]:
        proc, url = serve(model_dir, "--latency-s", str(latency), "--ignore-n")
        try:
            log(f"throughput at latency {latency} s: plain loop")
            seconds, plain = plain_loop(url, [r.body(chat=False) for r in requests])
            tokens = sum(a["usage"]["prompt_tokens"] + a["usage"]["completion_tokens"] for a in plain)
            want = [a["choices"][0]["text"] for a in plain]
            out["runs"].append(_row("plain sequential loop", None, latency, seconds, len(requests), len(rows), tokens))
            for conc in cfg["concurrency"]:
                log(f"throughput at latency {latency} s: runner, concurrency {conc}")
                client = CompletionsClient(ApiConfig(base=url, model="bench", mode="none", concurrency=conc))
                runner = RequestRunner(client, chat=False, model="bench", concurrency=conc)
                t0 = time.perf_counter()
                got = runner.run(requests)
                seconds = time.perf_counter() - t0
                runner.close()
                same = [g["text"] for g in got] == want
                spent = runner.stats["prompt_tokens"] + runner.stats["completion_tokens"]
                out["runs"].append({**_row("request runner", conc, latency, seconds, len(requests), len(rows), spent),
                                    "same_answers_as_plain": same})
            log(f"throughput at latency {latency} s: tidemark evaluate")
            res = evaluate(url, bench, work / f"tp_eval_{latency}", settings.samples, "--api-concurrency", "8",
                           "--methods", "ngram_coverage")
            out["runs"].append(_row("tidemark evaluate (Ray, all phases)", 8, latency, res["seconds"],
                                    res["spent"]["requests_sent"], res["counts"]["in"],
                                    res["spent"]["prompt_tokens"] + res["spent"]["completion_tokens"]))
        finally:
            proc.kill()
    for r in out["runs"]:  # speed-up over the plain loop at the same latency
        base = next(x for x in out["runs"] if x["path"] == "plain sequential loop" and x["latency_s"] == r["latency_s"])
        r["speedup_vs_plain"] = round(base["seconds"] / r["seconds"], 2)
    return out


def _row(path: str, concurrency, latency: float, seconds: float, requests: int, rows: int, tokens: int) -> dict:
    return {"path": path, "concurrency": concurrency, "latency_s": latency, "seconds": round(seconds, 2),
            "requests_per_s": round(requests / seconds, 2), "rows_per_s": round(rows / seconds, 2),
            "tokens_per_row": round(tokens / rows, 1)}


def markdown(t: dict) -> list[str]:
    lines = [f"Throughput: {t['rows']} rows x {t['samples']} samples = {t['requests']} seeded requests "
             "(one per sample), loopback server on one CPU thread.", "",
             "| path | concurrency | added latency (s) | s | requests/s | rows/s | tokens/row | vs plain loop | "
             "same answers |", "|---|---|---|---|---|---|---|---|---|"]
    for r in t["runs"]:
        lines.append(f"| {r['path']} | {r['concurrency'] or 1} | {r['latency_s']:g} | {r['seconds']} | "
                     f"{r['requests_per_s']} | {r['rows_per_s']} | {r['tokens_per_row']} | "
                     f"{r['speedup_vs_plain']}x | {r.get('same_answers_as_plain', '')} |")
    return lines
