"""Model configs for the benchmarks, written out here so that no hub download is ever needed.

The published architectures (`pythia-160m`, `pythia-1.4b`, `llama-1b`, `llama2-7b`) copy the fields of the released
`config.json` files (EleutherAI/pythia-*, meta-llama/Llama-3.2-1B, meta-llama/Llama-2-7b-hf); the benchmarks build
them with random weights, which is all a speed measurement needs. The small `gpt2-*` / `llama-tiny` configs are
the CPU models of `make bench`: `gpt2-tiny` is the 2-layer, width-128 GPT-2 that tests and the demo train
(with 2048 positions, so one window covers every benchmarked length), `gpt2-36m` a ~36M-parameter GPT-2 with
GPT-2's 50257-token vocabulary, so the vocabulary reduction weighs as it does in real models.
"""
from __future__ import annotations

from typing import Any

MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "gpt2-tiny": {
        "model_type": "gpt2", "n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 2000, "n_positions": 2048,
        "bos_token_id": 0, "eos_token_id": 0,
    },
    "gpt2-36m": {
        "model_type": "gpt2", "n_layer": 3, "n_embd": 512, "n_head": 8, "vocab_size": 50257, "n_positions": 2048,
    },
    "llama-tiny": {
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000, "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    },
    # EleutherAI/pythia-160m config.json
    "pythia-160m": {
        "model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 768,
        "intermediate_size": 3072, "num_attention_heads": 12, "num_hidden_layers": 12, "vocab_size": 50304,
        "max_position_embeddings": 2048, "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": True,
        "hidden_act": "gelu", "layer_norm_eps": 1e-5, "initializer_range": 0.02, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 0,
    },
    # EleutherAI/pythia-1.4b config.json (1,414,647,808 parameters)
    "pythia-1.4b": {
        "model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 2048,
        "intermediate_size": 8192, "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 50304,
        "max_position_embeddings": 2048, "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": True,
        "hidden_act": "gelu", "layer_norm_eps": 1e-5, "initializer_range": 0.02, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 0,
    },
    # meta-llama/Llama-3.2-1B config.json (1,235,814,400 parameters, tied embeddings)
    "llama-1b": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
        "hidden_act": "silu", "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True, "initializer_range": 0.02,
        "bos_token_id": 128000, "eos_token_id": 128001,
    },
    # meta-llama/Llama-2-7b-hf config.json (6,738,415,616 parameters): the 7B of docs/scaling.md's cost model
    "llama2-7b": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu",
        "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "attention_bias": False, "tie_word_embeddings": False, "initializer_range": 0.02,
        "bos_token_id": 1, "eos_token_id": 2,
    },
}


def build_config(name: str):
    from transformers import AutoConfig

    if name not in MODEL_CONFIGS:
        raise KeyError(f"unknown model config {name!r}; known: {', '.join(MODEL_CONFIGS)}")
    fields = dict(MODEL_CONFIGS[name])
    fields.pop("architectures", None)
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def build_model(name: str, *, device: str = "cpu", dtype=None, seed: int = 0, attn_implementation: str = "sdpa"):
    """A causal LM with random weights from a named config, created directly on `device` in `dtype`."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = dtype or torch.float32
    torch.manual_seed(seed)
    cfg = build_config(name)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn_implementation)
    return model.eval()


def n_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))
