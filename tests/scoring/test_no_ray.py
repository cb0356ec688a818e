"""The scoring engine must run where Ray is not installed (a GPU box used for benchmarks has only torch and
transformers): import and run it in a fresh interpreter in which `import ray` fails."""
from __future__ import annotations

SCRIPT = """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    import pyarrow as pa
    from scoring.lm.scorer import Scorer
    from jobs.plane.tasks import ScoreTask, TokenizeTask
    from scoring.detectors import parse_methods
    from scoring.stats.evaluation import compute_scores
    from scoring.lm.tokenstats import TOKEN_STATS_SCHEMA
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=1, n_head=2)).eval()
    out = Scorer(model).score([[1, 2, 3, 4, 5]])
    assert out[0]["error"] is None and len(out[0]["lp"]) == 4
    assert "ray" not in sys.modules
    print("ok")
"""


def test_scoring_runs_without_ray(run_without_ray):
    proc = run_without_ray(SCRIPT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
