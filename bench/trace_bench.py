"""Does `tidemark trace` lead a model's words back to the documents it trained on, and only to them? (`make bench`'s
`trace`; also `python -m bench.trace_bench --out DIR [--quick]`)

The controlled study of bench/trace_study.py: a tiny GPT-2 (the target) trains on `seen` State of the Union
passages `repeats` times and on `background` passages once; its control trains on the background alone. Both
continue the seen passages' openings (`samples` sampled continuations each); the continuations alone are traced
against an index of the whole corpus (every seen and background passage once). Reported per model: the share of
continuations with a span of at least 8 / 13 / 25 words, document-level precision (of the documents traced from a
continuation, the share that is the passage it was prompted from) and recall (per continuation, and per seen
passage: one of its samples), and the control's spans into the seen passages (none past the common-phrase level).
What it cannot say: how often a large model reproduces its data; the corpus and the model are tiny.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run_bench(quick: bool, work: Path) -> dict:
    from bench.trace_study import QUICK, TraceStudy, run_study

    res = run_study(QUICK if quick else TraceStudy(), work)
    for name in ("target", "control"):  # the share of texts with a span of at least N words, from its report
        rep = json.loads((Path(work) / f"trace_{name}" / "report.json").read_text())
        res[name]["share_with_span_of"] = {str(r["words"]): round(r["share"], 3)
                                           for r in rep["summary"]["share_with_span"]}
    return res


def _f(x, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x}"


def c_min(res: dict) -> int:
    return res["config"]["min_words"]


def markdown(res: dict) -> str:
    c = res["config"]
    lines = [f"Tiny GPT-2s ({c['steps']} steps): the target read {c['seen']} passages of {c['words']} words "
             f"{c['repeats']} times and {c['background']} background passages once; the control the background "
             f"alone. {c['samples']} continuations ({c['new_tokens']} tokens, temperature {c['temperature']}) of "
             f"each seen passage's first {c['prompt_words']} words, traced (--min-words {c['min_words']}) against "
             f"an index of every passage once; {res['seconds']} s in all.", "",
             "| model | final loss | continuations | with a span ≥ 8 / 13 / 25 words | precision | recall "
             "(continuations) | recall (passages) | longest span | median longest | into a seen passage: texts, "
             "longest | max rarity |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("target", "control"):
        r, m = res[name], res["models"][name]
        s = r.get("share_with_span_of", {})
        shares = " / ".join(_f(s.get(k)) for k in ("8", "13", "25"))
        lines.append(f"| {name} | {m['final_loss']:.3f} | {r['texts']} | {shares} | {_f(r['precision'])} | "
                     f"{_f(r['recall_texts'])} | {_f(r['recall_documents'])} | {r['longest_span']} | "
                     f"{r['median_longest']} | {r['texts_with_span_into_seen']}, {r['longest_span_into_seen']} | "
                     f"{r['max_rarity']:.1f} |")
    t, c = res["target"], res["control"]
    lines += ["", f"Common phrases (traced again at --min-words {c['common']['min_words']}): the control shares "
              f"{c['common']['spans']} runs with the corpus, the longest {c['common']['longest']} words, the rarest "
              f"{c['common']['max_rarity']:.1f}; {c['common']['into_seen']} of them in a seen passage (longest "
              f"{c['common']['longest_into_seen']} words). "
              f"{_f(t.get('rarer_than_every_control_span'))} of the target's spans (at --min-words "
              f"{c_min(res)}) are rarer than every one of the control's: the rarity ranking puts the control's "
              "runs last."]
    lines += ["", "Longest spans:", "", "| model | text | source | words | count | rarity | documents | span |",
              "|---|---|---|---|---|---|---|---|"]
    for name in ("target", "control"):
        for e in res[name]["examples"]:
            span = e["span"] if len(e["span"]) < 100 else e["span"][:99] + "…"
            lines.append(f"| {name} | {e['id']} | {e['source']} | {e['words']} | {e['count']} | {e['rarity']} | "
                         f"{', '.join(e['doc_ids'])} | {span} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from bench.common import environment, write_json

    ap = argparse.ArgumentParser(prog="python -m bench.trace_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default=None)
    args = ap.parse_args(argv)
    import shutil
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="trace-bench-"))
    res = run_bench(args.quick, work)
    res["environment"] = environment()
    write_json(args.out, "trace", res)
    (Path(args.out) / "trace.md").write_text(markdown(res))
    print(markdown(res))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
