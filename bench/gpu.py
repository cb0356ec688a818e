"""The GPU benchmark: Tidemark's scorer on one GPU, without Ray (the GPU machine has torch, transformers,
pyarrow and scikit-learn only; nothing on this path imports ray — tests/scoring/lm/test_scorer_fastpath.py checks it).

  python -m bench.gpu --model-config pythia-1.4b --out bench/results
  python -m bench.gpu --model-config llama-1b --compile --out bench/results
  python -m bench.gpu --model-config gpt2-tiny --device cpu --quick --out /tmp/gpu-smoke   # plumbing check, CPU

It builds the model from a published config with random weights (bench/model_configs.py; no hub download), in
bf16 with SDPA attention, and measures in one run:
  - tokens/s at 128 and 2048 tokens (and a mixed-length set): Tidemark (device default: length-bucketed batches,
    bf16 forward, fp32 chunked vocabulary reduction) vs the batch-1 research loop vs naive padded batching;
    the speed-up vs batch 1 (targets: ≥ 10× at 128 tokens) and MFU (target: ≥ 50% at 2048 tokens), FLOPs as in
    bench/flops.py, peak from a table keyed by the device name (or --peak-tflops);
  - Tidemark's tokens/s and peak memory over a sweep of max batch sizes, which is what the GPU default batch
    policy should be chosen from;
  - peak memory vs batch × length, and its flatness in vocabulary size (a small backbone with growing vocabularies).
Writes <out>/gpu_<model>_<device>.json, a plot and a short Markdown table (printed too).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path


def batch_sweep(model, *, device: str, lengths, batches, tokens: int, log=print) -> list[dict]:
    """Tokens/s and peak memory of the Tidemark scorer per max batch size, at each length."""
    from bench.common import random_sequences, timed
    from bench.memory_bench import measure
    from scoring.lm.scorer import Scorer

    vocab = model.get_output_embeddings().weight.shape[0]
    out = []
    for length in lengths:
        seqs = random_sequences([length] * max(1, tokens // length), vocab, seed=length)
        for b in batches:
            scorer = Scorer(model, max_batch_size=b, max_batch_tokens=b * length)
            try:
                scorer.score(seqs[:b])  # warm-up at this shape
                mem = measure(lambda: scorer.score(seqs[:b]), device)
                seconds, _ = timed(lambda: scorer.score(seqs), device)
            except Exception as exc:  # noqa: BLE001
                out.append({"length": length, "max_batch_size": b, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                continue
            rec = {"length": length, "max_batch_size": b, "tokens": len(seqs) * length, "seconds": round(seconds, 4),
                   "tokens_per_s": round(len(seqs) * length / seconds, 1), "peak_bytes_one_batch": mem["peak_bytes"],
                   "oom_backoffs": scorer.oom_backoffs}
            out.append(rec)
            log(f"  sweep T={length} max_batch={b}: {rec['tokens_per_s']:,.0f} tok/s, "
                f"peak {rec['peak_bytes_one_batch'] / 1e9:.2f} GB")
    return out


def parse_grid(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in item.lower().split("x")) for item in text.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-config", default="pythia-1.4b", help="a name in bench/model_configs.py")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default=None, help="bfloat16 (default on CUDA) | float16 | float32 (default on CPU)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 2048])
    ap.add_argument("--no-mixed", action="store_true", help="skip the mixed-length set")
    ap.add_argument("--tokens", type=int, default=1 << 19, help="tokens per cell for the batched methods")
    ap.add_argument("--ref-tokens", type=int, default=1 << 15, help="tokens per cell for the batch-1 loop")
    ap.add_argument("--naive-batch", type=int, default=16, help="batch size of the naive padded baseline")
    ap.add_argument("--naive-tokens", type=int, default=1 << 17)
    ap.add_argument("--compile", action="store_true", help="also measure Scorer(compile=True)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the peak (dense bf16 TFLOP/s)")
    ap.add_argument("--sweep", default="8,16,32,64,128", help="max batch sizes to sweep ('' to skip)")
    ap.add_argument("--memory-grid", default="1x128,64x128,8x2048,32x2048,64x2048",
                    help="B×T cells for the memory table")
    ap.add_argument("--vocabs", default="32000,128256,256000", help="vocabularies for the flatness check ('' skips)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a plumbing check")
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args(argv)

    import torch

    from bench.common import dtype_name, dtype_of, environment, write_json
    from bench.flops import peak_flops
    from bench.memory_bench import bench_memory_grid, bench_vocab_flatness
    from bench.model_configs import build_model
    from bench.scorer_bench import bench_throughput

    on_gpu = args.device.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        ap.error("CUDA is not available here; pass --device cpu for a plumbing check")
    if args.quick:
        args.tokens, args.ref_tokens, args.naive_tokens, args.repeats = 4096, 1024, 2048, 1
        args.sweep = "1,4" if not on_gpu else "8,64"
        args.memory_grid = "1x64,4x128" if not on_gpu else args.memory_grid
        args.vocabs = "2000,32000" if not on_gpu else args.vocabs
    dtype = dtype_of(args.dtype or ("bfloat16" if on_gpu else "float32"))
    env = environment(args.device)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else peak_flops(env["device_name"], dtype_name(dtype))
    started = time.perf_counter()
    model = build_model(args.model_config, device=args.device, dtype=dtype)
    print(f"[gpu-bench] {args.model_config}: {sum(p.numel() for p in model.parameters()) / 1e9:.3f}B params, "
          f"{dtype_name(dtype)}, attention {model.config._attn_implementation}, device {env['device_name']}, "
          f"peak {'unknown' if not peak else f'{peak / 1e12:.0f} TFLOP/s'}", flush=True)
    batch = 64 if on_gpu else 16
    throughput = bench_throughput(
        model, model_name=args.model_config, device=args.device, lengths=args.lengths, mixed=not args.no_mixed,
        tokens=args.tokens, batch=batch, naive_batch=args.naive_batch, repeats=args.repeats,
        method_tokens={"reference_b1": args.ref_tokens, f"naive_padded_b{args.naive_batch}": args.naive_tokens},
        warmup="cell", compile_=args.compile, peak=peak)
    sweep = []
    if args.sweep:
        sweep = batch_sweep(model, device=args.device, lengths=args.lengths,
                            batches=[int(b) for b in args.sweep.split(",")], tokens=args.tokens)
    memory = bench_memory_grid(model, model_name=args.model_config, device=args.device,
                               grid=parse_grid(args.memory_grid), naive_limit_bytes=8e9 if on_gpu else 2e8)
    del model
    if on_gpu:
        torch.cuda.empty_cache()
    flatness = None
    if args.vocabs:
        flatness = bench_vocab_flatness(device=args.device, dtype=dtype, vocabs=[int(v) for v in args.vocabs.split(",")],
                                        grid=parse_grid(args.memory_grid)[-2:], naive_limit_bytes=4e9 if on_gpu else 2e8)
    slug = re.sub(r"[^a-z0-9]+", "-", env["device_name"].lower()).strip("-")[:40]
    name = f"gpu_{args.model_config}_{slug}" + ("_quick" if args.quick else "")
    payload = {"name": name, "command": "python -m bench.gpu " + " ".join(argv if argv is not None else sys.argv[1:]),
               "environment": env, "model_config": args.model_config, "dtype": dtype_name(dtype),
               "attn_implementation": "sdpa", "peak_flops": peak, "lengths": args.lengths,
               "batch_sizes": {"tidemark_default": batch, "naive_padded": args.naive_batch, "reference": 1},
               "throughput": throughput, "batch_sweep": sweep, "memory": memory, "vocab_flatness": flatness,
               "headline": headline(throughput), "seconds": round(time.perf_counter() - started, 1)}
    path = write_json(args.out, name, payload)
    from bench.plots import plot_throughput

    plot_throughput([throughput], Path(args.out) / f"{name}.png", title=f"{env['device_name']}")
    md = render(payload)
    (Path(args.out) / f"{name}.md").write_text(md)
    print(md)
    print(f"[gpu-bench] wrote {path} in {payload['seconds']:.0f} s")
    return 0


def headline(throughput: dict) -> dict:
    """Tidemark vs batch 1 at each fixed length, and Tidemark's MFU: the issue's two GPU targets."""
    out = {}
    for cell in throughput["cells"]:
        tm = cell["methods"].get("tidemark", {})
        if "tokens_per_s" in tm:
            out[cell["cell"]] = {"tidemark_tokens_per_s": tm["tokens_per_s"],
                                 "speedup_vs_batch1": tm["speedup_vs_reference_b1"], "mfu": tm["mfu"]}
    return out


def render(p: dict) -> str:
    t = p["throughput"]
    methods = list(t["cells"][0]["methods"])
    lines = [f"# GPU bench: {p['model_config']} on {p['environment']['device_name']} ({p['dtype']})", "",
             f"`{p['command']}` — {p['environment']['timestamp']}, torch {p['environment']['torch']}", "",
             "| length | " + " | ".join(methods) + " | Tidemark MFU |", "|---|" + "---|" * (len(methods) + 1)]
    for c in t["cells"]:
        row = []
        for m in methods:
            r = c["methods"][m]
            row.append("failed: " + r["error"].split(":")[0] if "error" in r
                       else f"{r['tokens_per_s']:,.0f} tok/s ({r['speedup_vs_reference_b1']:.1f}×)")
        mfu = c["methods"].get("tidemark", {}).get("mfu")
        lines.append(f"| {c['cell']} | " + " | ".join(row) + f" | {'—' if mfu is None else f'{100 * mfu:.1f}%'} |")
    if p["batch_sweep"]:
        lines += ["", "| length | max batch | tokens/s | peak GB (one batch) |", "|---|---|---|---|"]
        for r in p["batch_sweep"]:
            lines.append(f"| {r['length']} | {r['max_batch_size']} | " + (
                f"{r['tokens_per_s']:,.0f} | {r['peak_bytes_one_batch'] / 1e9:.2f} |" if "error" not in r
                else f"failed: {r['error'][:60]} | |"))
    lines += ["", "| B × T | Tidemark peak GB | naive peak GB | B×T×V fp32 GB |", "|---|---|---|---|"]
    for r in p["memory"]["rows"]:
        naive = r["naive_padded"]
        lines.append(f"| {r['batch']} × {r['length']} | {r['tidemark']['peak_bytes'] / 1e9:.2f} | "
                     + (f"{naive['peak_bytes'] / 1e9:.2f}" if "peak_bytes" in naive else naive.get("skipped", "—"))
                     + f" | {r['btv_fp32_bytes'] / 1e9:.2f} |")
    if p["vocab_flatness"]:
        for f in p["vocab_flatness"]["flatness"]:
            if "tidemark_peak_growth_over_those_vocabs" in f:
                lines.append(f"\nVocabulary ×{f['vocab_growth']} at B×T={f['batch']}×{f['length']}: Tidemark peak "
                             f"×{f['tidemark_peak_growth_over_those_vocabs']}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
