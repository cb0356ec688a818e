"""The controlled contamination-impact study's files (scoring/studies/word_problems.py makes the task): tiny GPT-2s
trained here, their answers to the benchmark and to the rephrased reference benchmark written as
lm-evaluation-harness 0.4.13 writes `--log_samples` (tests/fixtures/lm_eval/README.md), and the corpora the
contaminated model trained on, for `tidemark overlap`.

    OUT/bench.jsonl, OUT/reference.jsonl        the two benchmarks' items (id, question, answer)
    OUT/corpus/target.jsonl                     what the contaminated model read (the task + the leaked items)
    OUT/results/bench/<model>/samples_word_problems_<date>.jsonl (+ results_<date>.json)
    OUT/results/reference/<model>/samples_word_problems_sibling_<date>.jsonl
    OUT/truth.json                              which items leaked, each model's per-item answers, the true gains

Models: `target` (the task and the leaked items, `steps` steps), `twin` (the task alone, the same steps and seed:
what the target would have scored without the leak), and `ref-<steps>` (the task alone, other seeds and step
counts: the reference models of the difference-in-differences and of ConStat).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from scoring.studies.word_problems import prompt, word_problem_study

DATE = "2026-01-01T00-00-00.000000"
REFERENCE_TASK = "word_problems_sibling"  # the harness's file-name date; fixed, so reruns write the same names
# One phrasing, numbers 1-20, lr 3e-3 (measured on 2 cores: the twin answers 12% / 26% / 51% of unseen items after
# 300 / 600 / 1,200 steps; the target, with its 50 leaked items 40 times over, 64-70% of those against the twin's
# 24-28%, two seeds; at 20 times over, one seed gave 60% against 26% and another only 32% against 28%).
# Two phrasings at 3e-3 did not learn at all, and at 1e-3 learned so slowly that nothing was memorised; with
# numbers 1-9 every leaked (a, b) pair is also in the training problems, so a leak taught the sum, not the item.
TRAINING = {"context": 64, "batch_size": 16, "vocab_size": 500, "n_layer": 2, "n_embd": 128}


def train(texts: list[str], out: Path, steps: int, seed: int, tokenizer_texts: list[str]) -> str:
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.contamination import torch_threads

    with torch_threads(1):  # the tiny model gains nothing from threads; two stall on a busy 2-core machine
        return train_tiny_gpt2(texts, out, tokenizer_texts=tokenizer_texts, steps=steps, seed=seed,
                               **TRAINING)["path"]


def answers(model_dir: str, items: list[dict]) -> list[str]:
    """Greedy answers (up to 3 new tokens, the first word of what comes back) to every item."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from scoring.studies.contamination import torch_threads

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    with torch_threads(1), torch.no_grad():
        for item in items:
            ids = tok(prompt(item), return_tensors="pt")["input_ids"]
            gen = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=tok.eos_token_id)
            out.append(tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True))
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def harness_line(doc_id: int, item: dict, response: str) -> dict:
    """One samples line as lm-evaluation-harness 0.4.13 writes it for a generate_until task with a strict-match
    filter (the first whitespace-separated word) and exact_match."""
    doc = {"id": item["id"], "question": item["question"], "answer": item["answer"]}
    extracted = (response.strip().split() or ["[invalid]"])[0]
    arg0 = prompt(item)
    return {"doc_id": doc_id, "doc": doc, "target": item["answer"],
            "arguments": {"gen_args_0": {"arg_0": arg0, "arg_1": {"until": ["\n"], "max_gen_toks": 3,
                                                                   "do_sample": False}}},
            "resps": [[response]], "filtered_resps": [extracted], "filter": "strict-match", "metrics": ["exact_match"],
            "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)), "prompt_hash": _sha(arg0),
            "target_hash": _sha(item["answer"]), "exact_match": float(extracted == item["answer"])}


def write_samples(root: Path, model: str, task: str, items: list[dict], responses: list[str]) -> list[float]:
    """root/<model>/samples_<task>_<DATE>.jsonl and results_<DATE>.json; returns the per-item exact_match."""
    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)
    lines = [harness_line(k, item, r) for k, (item, r) in enumerate(zip(items, responses))]
    (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n"
                                                                 for x in lines))
    scores = [x["exact_match"] for x in lines]
    results = folder / f"results_{DATE}.json"
    merged = json.loads(results.read_text()) if results.exists() else {"results": {}, "model_name": model,
                                                                       "config": {"model_args": {"pretrained": model}}}
    merged["results"][task] = {"exact_match,strict-match": sum(scores) / len(scores)}
    results.write_text(json.dumps(merged, indent=2))
    return scores


def build_impact_study(out_dir: str | Path, *, steps: int = 600, reference_steps=(300, 450, 600, 900, 1200),
                       seed: int = 0, **study_kwargs) -> dict:
    """Write the study and train its models (module docstring); returns the paths and the truth."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    study = word_problem_study(seed=seed, **study_kwargs)
    for name, items in (("bench", study.bench), ("reference", study.reference)):
        (out / f"{name}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    leaked = study.contamination()
    target_text = study.general + leaked
    (out / "corpus").mkdir(exist_ok=True)
    (out / "corpus" / "target.jsonl").write_text("".join(json.dumps({"id": f"doc{k}", "text": t}) + "\n"
                                                         for k, t in enumerate(target_text)))
    tokenizer_texts = study.general + [i["question"] for i in study.bench + study.reference]
    specs = [("target", target_text, steps, seed), ("twin", study.general, steps, seed),
             *[(f"ref-{s}", study.general, s, seed + 1 + k) for k, s in enumerate(reference_steps)]]
    truth = {"contaminated_ids": study.contaminated_ids, "facts": study.facts, "models": {}}
    for name, texts, n_steps, s in specs:
        model = train(texts, out / "models" / name, n_steps, s, tokenizer_texts)
        per = {}
        for bench, items, task in (("bench", study.bench, "word_problems"),
                                   ("reference", study.reference, REFERENCE_TASK)):
            per[bench] = write_samples(out / "results" / bench, name, task, items, answers(model, items))
        truth["models"][name] = {"steps": n_steps, "seed": s, "bench": per["bench"], "reference": per["reference"]}
    leak = set(study.contaminated_ids)
    mask = [i["id"] in leak for i in study.bench]

    def mean(xs, keep):
        xs = [x for x, k in zip(xs, keep) if k]
        return sum(xs) / len(xs) if xs else None

    t, w = truth["models"]["target"]["bench"], truth["models"]["twin"]["bench"]
    truth["true"] = {"target_leaked": mean(t, mask), "twin_leaked": mean(w, mask),
                     "target_clean": mean(t, [not m for m in mask]), "twin_clean": mean(w, [not m for m in mask]),
                     "gain_on_leaked": mean(t, mask) - mean(w, mask), "twin_full": mean(w, [True] * len(w)),
                     "target_full": mean(t, [True] * len(t))}
    (out / "truth.json").write_text(json.dumps(truth, indent=1))
    return {"root": str(out), "truth": truth, "bench": str(out / "bench.jsonl"),
            "reference": str(out / "reference.jsonl"), "corpus": str(out / "corpus" / "target.jsonl"),
            "results": str(out / "results" / "bench"), "reference_results": str(out / "results" / "reference")}
