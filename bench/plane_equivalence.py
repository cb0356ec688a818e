"""Outputs of one source tree against another's (issue 51: "behaviour unchanged, checked against outputs of the
old code, not against itself").

    python -m bench.plane_equivalence fixtures DIR          # the inputs, once (this tree makes them)
    python -m bench.plane_equivalence run --tree T --fixtures DIR --out RUNS
    python -m bench.plane_equivalence compare RUNS_A RUNS_B [--write bench/results/plane_equivalence.md]
    python -m bench.plane_equivalence config-frames --tree T --fixtures DIR --out OUT   # issue 51's walk, at run time

`run` executes the real CLI of tree T (`python -m jobs.cli`, with cwd and PYTHONPATH at T, this machine's .venv;
Ray's workers inherit PYTHONPATH) on the fixtures: `evaluate` on the local runner, on Ray, over a served model
(the loopback server, started once from this tree) and text-only (`--api-logprobs none`); `build-benchmark`
(StackMIA's recipe on ../shared's coffee dump; left out where ../shared is missing) and `overlap`; then the runs
of bench/equivalence_runs.py, which go through every room of jobs/parts (index-corpus, overlap --index, trace,
impact, paraphrase, audit, cutoff, canary, doc-mia, dataset-inference; issue 56). A run that reads an earlier
run's output (overlap --index the index, impact overlap's OUT) names it under the same RUNS. An old tree is a
`git worktree add DIR COMMIT`.

`compare` reads every Parquet file of each run (part files, scores, token stats, quarantine, data) as a table and
every JSON file (metrics, run.json, manifest, markers) as a tree (a jsonl file as a list of them), the index
shards' files (table.000, ...) and .txt files byte for byte, and requires them equal, with what depends on
the clock or the place set aside: keys that hold times (`seconds`, `*_s`, `phases_s`, dates of the run), run
ids, the command line and the two runs' own paths (replaced by a placeholder); a string naming one of jobs/parts'
modules by its name before issue 56's rooms is read with the room's name (bench/equivalence_runs.MOVED). Figures,
HTML and Markdown are not compared (they print timings).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.equivalence_runs import make_room_fixtures, new_module_names, room_runs

ROOT = Path(__file__).resolve().parents[1]
# the served model's name: not the name of a directory in a tree, or the model's identity would digest that directory
# (a served name is looked up as a local path first, jobs/kit/identity.model_identity)
SERVED = "served-tiny"
SHARED = ROOT.parent / "shared" / "data"
COFFEE = SHARED / "stackexchange" / "coffee.stackexchange.com"
# keys whose values depend on the clock, the process or the place, not on what the job computed
VOLATILE = re.compile(r"(^|_)(seconds|s|run_id|started|finished|written_at|built_at|created|time|timestamp|"
                      r"command|pid|host|hostname|elapsed|wall|rss|peak|memory|mb)$|^phases|^python$|^ray$|"
                      r"^versions$|^environment$|^api_base$|"  # api_base: the loopback server's port
                      r"^seconds_per_|_s_in_tasks$")  # trace's seconds_per_text, index-corpus's build_s_in_tasks


def log(msg: str) -> None:
    print(f"[equivalence] {msg}", file=sys.stderr, flush=True)


def make_fixtures(d: Path) -> None:
    from bench.workspace import passages, tiny_model_dir, write_benchmark

    d.mkdir(parents=True, exist_ok=True)
    rows = passages(48, words=64, seed=3)
    tiny_model_dir(d / "model", [r["text"] for r in rows[:24]], seed=0)
    tiny_model_dir(d / "ref", [r["text"] for r in rows[24:]], seed=1)
    bench = write_benchmark(d / "bench.jsonl", rows, seed=0)
    with open(bench, "a") as fh:  # rows that must be quarantined, not lost
        fh.write(json.dumps({"id": "empty", "input": "   ", "label": 1}) + "\n")
        fh.write(json.dumps({"id": "nolabel", "input": "some text here"}) + "\n")
    corpus = d / "corpus"
    corpus.mkdir(exist_ok=True)
    docs = [{"id": f"doc{k}", "text": r["text"]} for k, r in enumerate(rows[:12])]
    docs += [{"id": f"other{k}", "text": " ".join(r["text"].split()[::-1])} for k, r in enumerate(rows[12:30])]
    (corpus / "part0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in docs))
    make_room_fixtures(d, rows)
    log(f"fixtures in {d}")


def runs(fx: Path, url: str, root: Path) -> dict[str, list[str]]:
    """Every run's arguments but --out (ROOT/NAME), in the order they go; root: the runs' folder, where a run finds
    an earlier one's output."""
    model, ref, bench = str(fx / "model" / "tiny-gpt2"), str(fx / "ref" / "tiny-gpt2"), str(fx / "bench.jsonl")
    ev = ["evaluate", "--benchmark", bench, "--model", model, "--quiet", "--shard-size", "20",
          "--blind-sample", "40"]
    out = {
        "evaluate-local": [*ev, "--runner", "local", "--ref-model", ref, "--ref-corpus", str(fx / "corpus")],
        "evaluate-ray": [*ev, "--runner", "ray", "--ref-model", ref],
        "evaluate-served": ["evaluate", "--benchmark", bench, "--model", SERVED, "--api-base", url, "--tokenizer",
                            model, "--quiet", "--shard-size", "20", "--blind-sample", "40",
                            "--methods", "loss,zlib,min_k@k=0.2,min_k_pp@topk=5,recall"],
        "evaluate-text-only": ["evaluate", "--benchmark", bench, "--model", SERVED, "--api-base", url,
                               "--api-logprobs", "none", "--methods", "ngram_coverage,samia", "--samples", "3",
                               "--max-new-tokens", "12", "--quiet", "--shard-size", "20",
                               "--blind-sample", "40"],
        "overlap": ["overlap", "--benchmark", bench, "--corpus", str(fx / "corpus"), "--quiet"],
    }
    if (COFFEE / "Posts.xml").is_file():
        out["build-benchmark"] = ["build-benchmark", "--config", str(ROOT / "jobs/configs/stackmia.yaml"),
                                  "--set", f"source.path={COFFEE}", "--set", "cutoffs.member_before=2015-02-01",
                                  "--set", "cutoffs.nonmember_after=2015-03-01"]
    return {**out, **room_runs(fx, root)}


def serve(model: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "scoring.api.loopback", "--model", model, "--name", SERVED,
                             "--lifetime-s", "3600"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the loopback server did not start (printed {url!r})")
    return proc, url


def run_tree(tree: Path, fx: Path, out: Path, only: list[str] | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    proc, url = serve(str(fx / "model" / "tiny-gpt2"))
    done, start = {}, time.perf_counter()
    try:
        for name, args in runs(fx, url, out).items():
            if only and name not in only:
                continue
            dest = out / name
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "jobs.cli", *args, "--out", str(dest)], cwd=tree, env=env,
                                 capture_output=True, text=True)
            done[name] = {"rc": res.returncode, "seconds": round(time.perf_counter() - t0, 1)}
            log(f"{tree.name}: {name} rc={res.returncode} in {done[name]['seconds']} s")
            if res.returncode:
                (out / f"{name}.stderr").write_text(res.stderr)
                log(res.stderr[-3000:])
    finally:
        proc.kill()
    wall = round(time.perf_counter() - start, 1)
    log(f"{tree.name}: {len(done)} run(s) in {wall} s")
    (out / "runs.json").write_text(json.dumps({"tree": str(tree), "runs": done, "seconds": wall}, indent=1))
    return done


def clean(value, places: list[str]):
    if isinstance(value, dict):
        return {k: clean(v, places) for k, v in sorted(value.items()) if not VOLATILE.search(str(k))}
    if isinstance(value, list):
        return [clean(v, places) for v in value]
    if isinstance(value, str):
        for p in places:
            value = value.replace(p, "<place>")
        return new_module_names(value)  # a moved module's old name, as its new one (bench/equivalence_runs.MOVED)
    return value


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'new' if k in b else 'old'}")
            else:
                out += differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if a != b and not (isinstance(a, float) and isinstance(b, float) and a != a and b != b):
        return [f"{path}: {str(a)[:80]} != {str(b)[:80]}"]
    return []


def compare_file(fa: Path, fb: Path, places: list[str]) -> list[str]:
    if fa.suffix == ".parquet":
        import pyarrow.parquet as pq

        ta, tb = pq.read_table(fa), pq.read_table(fb)
        if ta.schema != tb.schema:
            return [f"schema: {ta.schema.names} != {tb.schema.names}"]
        return differences(clean(ta.to_pylist(), places), clean(tb.to_pylist(), places))
    if fa.suffix == ".json" or fa.name in ("_SUCCESS", "_COMMITTED") or fa.parent.name == "_parts":
        try:
            ja, jb = json.loads(fa.read_text()), json.loads(fb.read_text())
        except (ValueError, UnicodeDecodeError):
            return [] if fa.read_bytes() == fb.read_bytes() else ["bytes differ"]
        return differences(clean(ja, places), clean(jb, places))
    if fa.suffix == ".jsonl":
        ja, jb = ([json.loads(x) for x in f.read_text().splitlines() if x.strip()] for f in (fa, fb))
        return differences(clean(ja, places), clean(jb, places))
    if fa.suffix == ".txt" or BINARY.match(fa.suffix):
        return [] if fa.read_bytes() == fb.read_bytes() else ["bytes differ"]
    return []


COMPARED = (".parquet", ".json", ".jsonl", ".txt")
BINARY = re.compile(r"^\.\d+$")  # an index shard's files (table.000, tokenized.000, text.000, ...): byte for byte


def compare(a: Path, b: Path) -> dict:
    result = {}
    places = sorted({str(a.resolve()), str(b.resolve()), str(a), str(b)}, key=len, reverse=True)
    for run in sorted(p.name for p in a.iterdir() if p.is_dir()):
        ra, rb = a / run, b / run
        files_a = {str(f.relative_to(ra)) for f in ra.rglob("*") if f.is_file()}
        files_b = {str(f.relative_to(rb)) for f in rb.rglob("*") if f.is_file()} if rb.is_dir() else set()
        # part names carry run ids and digests; the request journal's files, the time and process that wrote them
        rel = lambda s: re.sub(r"[0-9a-f]{12,}|run-[\w-]+|\d{9,}-\d+-[0-9a-f]{8}", "*", s)  # noqa: E731
        only = sorted({rel(f) for f in files_a} ^ {rel(f) for f in files_b})
        checked, diffs = 0, {}
        for f in sorted(files_a & files_b):
            fa = ra / f
            if fa.suffix in COMPARED or BINARY.match(fa.suffix) or fa.name == "_SUCCESS" or "_parts" in fa.parts:
                d = compare_file(fa, rb / f, places)
                checked += 1
                if d:
                    diffs[f] = d[:8] + ([f"... {len(d) - 8} more"] if len(d) > 8 else [])
        result[run] = {"files_compared": checked, "files_only_on_one_side": only, "differences": diffs}
    return result


def markdown(result: dict, a: str, b: str) -> str:
    lines = [f"# Outputs of {b} against {a}", "", "| run | files compared | only on one side | files that differ |",
             "|---|---|---|---|"]
    for run, r in result.items():
        lines.append(f"| {run} | {r['files_compared']} | {len(r['files_only_on_one_side'])} | "
                     f"{len(r['differences'])} |")
    for run, r in result.items():
        for f, d in r["differences"].items():
            lines += ["", f"## {run}/{f}", *[f"- `{x}`" for x in d]]
        for f in r["files_only_on_one_side"]:
            lines += [f"- {run}: only on one side: `{f}`"]
    return "\n".join(lines) + "\n"


CONFIG_FRAMES = r"""
import json, sys, threading
from pathlib import Path
tree = Path(sys.argv[1]); sys.path.insert(0, str(tree))
from jobs.commands.evaluate import EvaluateConfig, run_evaluate
LAYERS = (("jobs.commands", 5), ("jobs.parts", 4), ("jobs.kit", 3), ("jobs.plane", 3), ("jobs", 5), ("curation", 2),
          ("scoring", 1))
roots = tuple(str(tree / p) for p in ("jobs", "curation", "scoring"))
def layer(m):
    return next((r for p, r in LAYERS if m == p or m.startswith(p + ".")), 0)
def name(f):
    return ".".join(Path(f).relative_to(tree).with_suffix("").parts)
rooms, functions, climbs = {}, set(), set()
def holds(frame):
    try:
        return any(type(v) is EvaluateConfig for v in frame.f_locals.values())
    except Exception:
        return False
def prof(frame, event, arg):
    if event != "call" or not frame.f_code.co_filename.startswith(roots) or not holds(frame):
        return
    m = name(frame.f_code.co_filename)
    rooms[m] = rooms.get(m, 0) + 1
    functions.add(f"{m}:{frame.f_code.co_qualname}")
    back = frame.f_back
    while back is not None and not back.f_code.co_filename.startswith(roots):
        back = back.f_back
    if back is not None and layer(m) > layer(name(back.f_code.co_filename)):
        climbs.add(f"{name(back.f_code.co_filename)}:{back.f_code.co_qualname} -> {m}:{frame.f_code.co_qualname}")
cfg = EvaluateConfig(**json.loads(sys.argv[2]))
sys.setprofile(prof); threading.setprofile(prof)
try:
    run_evaluate(cfg)
finally:
    sys.setprofile(None); threading.setprofile(None)
print(json.dumps({"rooms": sorted(rooms), "functions": sorted(functions), "climbs": sorted(climbs)}))
"""


def config_frames(tree: Path, fx: Path, out: Path) -> dict:
    """Run `evaluate` (local runner) in a process of tree T under a profiler: every frame of jobs/, curation/ or
    scoring/ that holds the config (an argument, a local, or a closure's cell), and every call from a lower layer
    into such a frame in a higher one. What the static walk (tests/config_walk.py) reads, seen at run time."""
    kw = {"benchmark": str(fx / "bench.jsonl"), "model": str(fx / "model" / "tiny-gpt2"), "out": str(out),
          "runner": "local", "progress": False, "ref_model": str(fx / "ref" / "tiny-gpt2"), "shard_size": 20}
    res = subprocess.run([sys.executable, "-c", CONFIG_FRAMES, str(tree), json.dumps(kw)], cwd=tree,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    f = sub.add_parser("fixtures", help="write the inputs")
    f.add_argument("dir", type=Path)
    r = sub.add_parser("run", help="run a tree's CLI on the fixtures")
    r.add_argument("--tree", type=Path, required=True)
    r.add_argument("--fixtures", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", nargs="*")
    c = sub.add_parser("compare", help="compare two runs' outputs")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--write", type=Path)
    w = sub.add_parser("config-frames", help="evaluate's config at run time: the frames that hold it, the climbs")
    w.add_argument("--tree", type=Path, required=True)
    w.add_argument("--fixtures", type=Path, required=True)
    w.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.what == "fixtures":
        make_fixtures(args.dir)
    elif args.what == "config-frames":
        print(json.dumps(config_frames(args.tree.resolve(), args.fixtures.resolve(), args.out.resolve()), indent=1))
    elif args.what == "run":
        done = run_tree(args.tree.resolve(), args.fixtures.resolve(), args.out.resolve(), args.only)
        return 1 if any(v["rc"] for v in done.values()) else 0
    else:
        result = compare(args.a, args.b)
        text = markdown(result, str(args.a), str(args.b))
        print(text)
        if args.write:
            args.write.write_text(text)
            args.write.with_suffix(".json").write_text(json.dumps(result, indent=1))
        return 1 if any(r["differences"] or r["files_only_on_one_side"] for r in result.values()) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
