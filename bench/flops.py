"""FLOPs of a forward pass and model FLOPs utilisation (MFU = achieved FLOP/s ÷ the device's peak).

Counted per scored sequence of L tokens, forward only, the work the result needs:
- 2 · (weights of every Linear/Conv1D layer in the backbone) · L: one multiply-add per weight per token;
- 2 · (LM-head weights) · (L − 1): Tidemark applies the head only to predicted positions (position 0 predicts
  nothing);
- attention scores and values, causal: position i attends to i+1 keys, 2 FLOPs per (query, key, channel) for QKᵀ
  and again for A·V, so 2 · n_layer · d_attn · L(L+1) per sequence (d_attn = query heads × head dim). This is
  half the "full square" count some MFU write-ups use, so the MFU reported here is the conservative one.
Embedding look-ups, norms, softmaxes and the vocabulary reduction are not counted (they are not matmul work).
"""
from __future__ import annotations

from typing import Iterable

# Dense (non-sparse) bf16/fp16 tensor-core peaks from NVIDIA's datasheets, in TFLOP/s, keyed by a substring of
# torch.cuda.get_device_name(). Checked in order: the first key found in the name wins.
PEAK_TFLOPS_BF16 = (
    ("H200", 989.0),  # H200 SXM: same tensor cores as H100 SXM
    ("H100 PCIe", 756.0),
    ("H100 80GB HBM3", 989.0),  # H100 SXM5
    ("H100 SXM", 989.0),
    ("A100", 312.0),
)


def peak_flops(device_name: str, dtype_name: str) -> float | None:
    """Peak FLOP/s for bf16/fp16 on a known GPU, else None (MFU is then not reported)."""
    if dtype_name not in ("bfloat16", "float16"):
        return None
    for key, tflops in PEAK_TFLOPS_BF16:
        if key.lower() in device_name.lower():
            return tflops * 1e12
    return None


def _linear_weights(module) -> int:
    import torch

    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - very old transformers
        Conv1D = ()
    total = 0
    for m in module.modules():
        if isinstance(m, (torch.nn.Linear, Conv1D)) and getattr(m, "weight", None) is not None:
            total += m.weight.numel()
    return int(total)


def flop_counts(model) -> dict:
    """The per-token constants of a causal LM: backbone matmul weights, LM-head weights, layers, d_attn."""
    cfg = model.config
    head = model.get_output_embeddings()
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer")
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head")
    d_model = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd")
    head_dim = getattr(cfg, "head_dim", None) or d_model // heads
    return {
        "backbone_matmul_params": _linear_weights(model.base_model),
        "lm_head_params": int(head.weight.numel()),
        "n_layer": int(layers),
        "d_attn": int(heads * head_dim),
    }


def forward_flops(counts: dict, lengths: Iterable[int]) -> float:
    """Total forward FLOPs to score sequences of these lengths (one window each)."""
    total = 0.0
    for n in lengths:
        n = int(n)
        total += 2.0 * counts["backbone_matmul_params"] * n
        total += 2.0 * counts["lm_head_params"] * max(n - 1, 0)
        total += 2.0 * counts["n_layer"] * counts["d_attn"] * n * (n + 1)
    return total


def mfu(flops: float, seconds: float, peak: float | None) -> float | None:
    """Achieved FLOP/s ÷ peak, or None when the peak is unknown (CPUs, unlisted GPUs)."""
    if not peak or seconds <= 0:
        return None
    return flops / seconds / peak
