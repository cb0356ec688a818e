"""The scorer's fast path against the research-style reference loop of bench/baselines.py (batch 1, full HF
forward, full log_softmax over T×V): the five token stats agree within fp32 tolerance on the default CPU path,
on length-bucketed batches (with and without padding to bucket widths, with and without an attention mask) and on
windowed long texts; within bf16 tolerance in bf16. Adaptive back-off on CUDA out-of-memory is checked with a
backbone that raises torch's OutOfMemoryError for batches larger than N. And the GPU benchmark runs where
`import ray` fails."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from bench.baselines import naive_padded, reference_loop, reference_windowed  # noqa: E402
from scoring.lm.scorer import Scorer  # noqa: E402

STATS = ("lp", "lp_max", "mu", "sigma", "entropy")
VOCAB = 1000


@pytest.fixture(scope="module")
def model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4, bos_token_id=0,
                     eos_token_id=0)
    m = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # sharper than the near-uniform init, so σ and the max are not all alike
        m.lm_head.weight.mul_(8.0)
    return m


def seqs_of(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, size=n).tolist() for n in lengths]


def assert_close(got, want, atol, rtol=0.0):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g["error"] is None, g["error"]
        for k in STATS:
            assert len(g[k]) == len(w[k]), (i, k)
            np.testing.assert_allclose(g[k], w[k], atol=atol, rtol=rtol, err_msg=f"row {i}, {k}")


MIXED = (2, 3, 17, 64, 128, 5, 90, 33, 128, 41)


@pytest.mark.parametrize("kwargs", [
    {"max_batch_size": 1},  # batch 1: the first version's policy
    {},  # the CPU default: up to 16 windows within 2,048 tokens
    {"max_batch_size": 4},
    {"max_batch_size": 16, "max_batch_tokens": 16 * 128},
    {"max_batch_size": 8, "pad_multiple": 64},
    {"max_batch_size": 8, "attention_mask": True},
    {"max_batch_size": 8, "row_chunk_elems": VOCAB * 7},  # 7 predicted rows per vocabulary chunk
], ids=["b1", "cpu-default", "b4", "b16", "b8-pad64", "b8-mask", "b8-chunk7"])
def test_fast_path_equals_reference_loop(model, kwargs):
    seqs = seqs_of(MIXED)
    want = reference_loop(model, seqs)
    scorer = Scorer(model, **kwargs)
    got = scorer.score(seqs)
    if kwargs.get("max_batch_size", 16) > 1:
        assert scorer.calls < len(seqs)  # it really batched
    assert_close(got, want, atol=2e-5, rtol=2e-5)


def test_naive_padded_baseline_equals_reference(model):
    seqs = seqs_of(MIXED, seed=1)
    assert_close([{**x, "error": None} for x in naive_padded(model, seqs, 4)], reference_loop(model, seqs),
                 atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("batch", [1, 6])
@pytest.mark.parametrize("n,context,stride", [(300, 64, 32), (257, 128, 100), (129, 64, 1 + 62)])
def test_windowed_long_texts_equal_the_strided_reference(model, batch, n, context, stride):
    seqs = seqs_of([n, n // 2, 40], seed=n)
    want = [reference_windowed(model, s, context, stride) for s in seqs]
    got = Scorer(model, context=context, stride=stride, max_batch_size=batch).score(seqs)
    assert got[0]["n_windows"] > 1
    assert_close(got, want, atol=2e-5, rtol=2e-5)


def test_bf16_fast_path_is_within_bf16_tolerance(model):
    import copy

    m16 = copy.deepcopy(model).to(torch.bfloat16)
    seqs = seqs_of((40, 17, 64, 9), seed=3)
    truth = reference_loop(model, seqs)  # fp32
    ref16 = reference_loop(m16, seqs)  # the research loop on the same bf16 model (bf16 logits, fp32 softmax)
    for kwargs in ({}, {"max_batch_size": 4}):
        got = Scorer(m16, **kwargs).score(seqs)
        # Same bf16 logits, reduced in fp32 both ways; batched bf16 GEMMs may round differently.
        assert_close(got, ref16, atol=2e-2, rtol=1e-2)
        # bf16 keeps 8 bits of mantissa: logits of size ~10 carry errors of a few 1e-2 (seen: ≤ 0.053).
        assert_close(got, truth, atol=0.15, rtol=0.02)
        assert all(g[k].dtype == np.float32 for g in got for k in STATS)


@pytest.mark.slow
@pytest.mark.heavy
def test_compiled_scorer_equals_reference_without_recompiling(model):
    """torch.compile(dynamic=True) with widths padded to multiples of 64: one graph serves every batch shape
    (CPU inductor; ~20–80 s of compilation on 2 cores)."""
    pytest.importorskip("torch._inductor")
    seqs = seqs_of(MIXED, seed=7)
    scorer = Scorer(model, compile=True, max_batch_size=4)
    assert scorer.pad_multiple == 64
    assert_close(scorer.score(seqs), reference_loop(model, seqs), atol=2e-5, rtol=2e-5)
    assert_close(scorer.score(seqs[::-1]), reference_loop(model, seqs[::-1]), atol=2e-5, rtol=2e-5)


class OOMAbove:
    """A backbone that raises CUDA's OutOfMemoryError when asked for more than `max_rows` rows or a window longer
    than `max_len`, and otherwise runs the real one."""

    def __init__(self, backbone, max_rows: int, max_len: int = 10**9):
        self.backbone, self.max_rows, self.max_len = backbone, max_rows, max_len
        self.ooms, self.ok_shapes = 0, []

    def __call__(self, input_ids, **kwargs):
        rows, width = input_ids.shape
        if rows > self.max_rows or width > self.max_len:
            self.ooms += 1
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (fake)")
        self.ok_shapes.append((rows, width))
        return self.backbone(input_ids=input_ids, **kwargs)


def test_cuda_oom_backs_off_and_remembers_the_budget(model):
    seqs = seqs_of([32] * 40, seed=5)
    want = Scorer(model, max_batch_size=16).score(seqs)
    scorer = Scorer(model, max_batch_size=16, max_batch_tokens=16 * 32)
    fake = scorer.backbone = OOMAbove(scorer.backbone, max_rows=3)
    got = scorer.score(seqs)
    assert_close(got, want, atol=1e-6)
    # 16 → 8 → 4 → 2 rows: three OOMs on the first batch, then every later batch is cut to fit from the start.
    assert fake.ooms == 3 and scorer.oom_backoffs == 3
    assert scorer.max_batch_tokens == 2 * 32
    assert max(r for r, _ in fake.ok_shapes) == 2
    assert sum(r for r, _ in fake.ok_shapes) == 40  # each window scored once


def test_a_window_that_never_fits_fails_alone(model):
    seqs = seqs_of([20, 100, 20, 30], seed=6)
    scorer = Scorer(model, max_batch_size=4)
    scorer.backbone = OOMAbove(scorer.backbone, max_rows=4, max_len=64)
    got = scorer.score(seqs)
    assert got[1]["error"].startswith("OutOfMemoryError") and len(got[1]["lp"]) == 0
    want = reference_loop(model, [seqs[i] for i in (0, 2, 3)])
    assert_close([got[i] for i in (0, 2, 3)], want, atol=2e-5, rtol=2e-5)


def test_the_gpu_benchmark_runs_without_ray(tmp_path, run_without_ray):
    script = f"""
        from bench import gpu
        rc = gpu.main(["--model-config", "gpt2-tiny", "--device", "cpu", "--lengths", "16", "48",
                       "--tokens", "192", "--ref-tokens", "96", "--naive-tokens", "96", "--naive-batch", "4",
                       "--repeats", "1", "--sweep", "1,2", "--memory-grid", "1x16,2x32", "--vocabs", "",
                       "--out", {str(tmp_path)!r}])
        assert rc == 0
        assert "ray" not in sys.modules
        print("ok")
    """
    proc = run_without_ray(script, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
    import json

    (result,) = tmp_path.glob("gpu_gpt2-tiny_*.json")
    payload = json.loads(result.read_text())
    cells = {c["cell"]: c for c in payload["throughput"]["cells"]}
    assert set(cells) == {"16", "48", "mixed"}
    for c in cells.values():
        for name, rec in c["methods"].items():
            assert rec["tokens_per_s"] > 0 and rec["max_abs_diff_vs_reference_first_seq"] < 1e-4, name
    assert payload["environment"]["torch"] and payload["batch_sweep"]
