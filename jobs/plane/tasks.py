"""Batch callables over pyarrow tables: the units that Ray Data's `map_batches` runs as actor pools. They import
no Ray, so a GPU machine without Ray (or a test) can call them directly.
"""
from __future__ import annotations

import os

import pyarrow as pa

from scoring.lm.tokenstats import STAT_FIELDS, TOKEN_STATS_SCHEMA
from scoring.lm.views import GRAD, TOKEN_COLUMNS, ViewBuilder, ViewRequest

TOKENIZED_SCHEMA = pa.schema([
    pa.field("id", pa.string()), pa.field("view", pa.string()), pa.field("text", pa.string()),
    pa.field("token_ids", pa.list_(pa.int32())), pa.field("offsets", pa.list_(pa.int32())),
    pa.field("first_predicted", pa.int32()), pa.field("prefix_len", pa.int32()), pa.field("error", pa.string()),
])
SCORED_SCHEMA = TOKEN_STATS_SCHEMA.append(pa.field("prefix_len", pa.int32()))


class TokenizeTask:
    """CPU stage: text rows (id, input) → one tokenised row per view. `tokenizer` (default: the model's own) is
    the local tokenizer of a served model."""

    def __init__(self, model: str, views: tuple[str, ...], prefix_text: str | None = None,
                 rename_original: str | None = None, tokenizer: str | None = None, prefixes=(), context_pool=()):
        from scoring.lm.model import load_tokenizer

        request = ViewRequest(tuple(views), prefix_text, tuple(map(tuple, prefixes)), tuple(map(tuple, context_pool)))
        self.builder = ViewBuilder(load_tokenizer(tokenizer or model), request, rename_original=rename_original)

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols = self.builder(batch.select(["id", "input"]).to_pydict())
        return pa.table({c: cols[c] for c in TOKEN_COLUMNS}, schema=TOKENIZED_SCHEMA)


class ScoreTask:
    """Model stage: tokenised rows → token-stats rows. Loads the model once per actor."""

    def __init__(self, model: str, scorer_kwargs: dict | None = None, threads: int | None = None,
                 device: str | None = None, hooks: dict | None = None, api: dict | None = None,
                 tokenizer: str | None = None, neighbours: dict | None = None):
        self.rows_seen = 0
        self.grads = None  # the gradient view's GradNorms, made on first use (scoring/lm/gradnorm.py)
        self.hooks = dict(hooks or {})
        if threads:
            import torch

            torch.set_num_threads(threads)  # two actors on 2 cores must not both spawn 2 threads
        self.neighbours = None
        if neighbours:  # the neighbourhood attack's views, made here where a GPU may be (scoring/lm/neighbours.py)
            from scoring.lm.model import load_tokenizer
            from scoring.lm.neighbours import NeighbourViews

            self.neighbours = NeighbourViews(neighbours["model"], neighbours["views"],
                                             load_tokenizer(tokenizer or model), device=device or "cpu")
        if api:  # a served model: HTTP requests, no weights here (scoring/api)
            self.scorer = api_scorer(api, tokenizer or model, scorer_kwargs or {})
            return
        from scoring.lm.model import load_causal_lm
        from scoring.lm.scorer import Scorer

        lm, _ = load_causal_lm(model, device=device)
        self.scorer = Scorer(lm, model_name=model, **(scorer_kwargs or {}))

    def api_stats(self) -> dict | None:
        """HTTP and extraction counters so far (a served model only): the pool reports them per part."""
        return self.scorer.stats() if hasattr(self.scorer, "stats") else None

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols = batch.to_pydict()
        self.rows_seen += batch.num_rows
        if self.hooks:
            _injected_fault(self.hooks, cols["id"])
        if self.neighbours is not None:
            cols = self.neighbours(cols)
        n = len(cols["id"])
        calls_before = self.scorer.calls
        is_grad = [v == GRAD for v in cols.get("view", [None] * n)]
        if any(is_grad):  # the gradient view is back-propagated, the others scored
            scored = _merged(self.scorer(_rows(cols, [i for i in range(n) if not is_grad[i]])),
                             self._grad_rows(_rows(cols, [i for i in range(n) if is_grad[i]])), is_grad)
        else:
            scored = self.scorer(cols)
        if self.hooks.get("score_log"):
            _log_scored(self.hooks["score_log"], cols, self.scorer.calls - calls_before)
        out = {f.name: scored.get(f.name, [None] * n) for f in SCORED_SCHEMA}
        for k in STAT_FIELDS:
            out[k] = [v if v else [] for v in out[k]]
        return pa.table(out, schema=SCORED_SCHEMA)

    def _grad_rows(self, cols: dict) -> dict:
        """The gradient view's rows: each parameter tensor's gradient norms instead of token stats
        (scoring/lm/gradnorm.py). A served model has no gradient: its rows fail (the job refuses first)."""
        from scoring.lm.gradnorm import GradNorms

        if self.grads is None:
            if not hasattr(self.scorer, "model"):
                raise ValueError("the gradient view needs the model's weights; a served model has none")
            self.grads = GradNorms(self.scorer.model, context=self.scorer.context, stride=self.scorer.stride)
        got = self.grads(cols["token_ids"])
        out = {k: list(v) for k, v in cols.items()}
        out["grad_norms"] = [None if g is None else g.tolist() for g, _ in got]
        prior = list(cols.get("error") or [None] * len(got))
        out["error"] = [p or e for p, (_, e) in zip(prior, got)]
        out["n_windows"] = [0] * len(got)
        out["model"] = [self.scorer.model_name] * len(got)
        out["lp_source"] = ["local"] * len(got)
        return out


def _rows(cols: dict, index: list[int]) -> dict:
    return {k: [v[i] for i in index] for k, v in cols.items()}


def _merged(scored: dict, grads: dict, is_grad: list[bool]) -> dict:
    """The scored rows and the gradient rows back in the batch's order (a column one side lacks is null there)."""
    order, s, g = [], 0, 0
    for flag in is_grad:
        order.append((grads, g) if flag else (scored, s))
        g, s = g + flag, s + (not flag)
    return {k: [src[k][j] if k in src else None for src, j in order] for k in set(scored) | set(grads)}


def api_scorer(api: dict, tokenizer: str, scorer_kwargs: dict):
    """An ApiScorer from the probed config the driver sends (`api`: ApiConfig fields, `context`, and the key
    wrapped in Secret so that no repr of the actor's arguments shows it)."""
    from scoring.api.client import ApiConfig
    from scoring.api.scorer import ApiScorer
    from scoring.lm.model import load_tokenizer

    cfg = ApiConfig.from_dict(api)
    key = api.get("key")
    return ApiScorer(cfg, load_tokenizer(tokenizer), context=int(scorer_kwargs.get("context") or api["context"]),
                     stride=scorer_kwargs.get("stride"), api_key=key.value if key is not None else None)


# ---- operations hooks, set from the driver's environment (jobs/commands/evaluate.py passes `hooks_from_env()`):
# TIDEMARK_SCORE_LOG=FILE          append one JSON line per scored batch: pid, ids, views, forward passes run: an
#                                  audit trail of what a run actually scored (the resume test counts scorer calls).
# TIDEMARK_FAULT_EXIT_ON_ID=ID     fault injection: the actor process exits (os._exit, no cleanup) on a batch with ID,
# TIDEMARK_FAULT_MAX_EXITS=N       at most N times in all (default 1), counted with files in
# TIDEMARK_FAULT_STATE_DIR=DIR     (required with EXIT_ON_ID) so the count survives the actor's restarts.
# TIDEMARK_FAULT_SLOW_S=SECONDS     a slow worker: sleep this long before each scored batch (cut-off tests).
HOOK_ENV = {"score_log": "TIDEMARK_SCORE_LOG", "exit_on_id": "TIDEMARK_FAULT_EXIT_ON_ID",
            "max_exits": "TIDEMARK_FAULT_MAX_EXITS", "state_dir": "TIDEMARK_FAULT_STATE_DIR",
            "slow_s": "TIDEMARK_FAULT_SLOW_S"}


def hooks_from_env(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    hooks = {k: environ[v] for k, v in HOOK_ENV.items() if environ.get(v)}
    if "exit_on_id" in hooks and "state_dir" not in hooks:
        raise ValueError("TIDEMARK_FAULT_EXIT_ON_ID needs TIDEMARK_FAULT_STATE_DIR (where exits are counted)")
    return hooks


def _injected_fault(hooks: dict, ids) -> None:
    if hooks.get("slow_s"):
        import time

        time.sleep(float(hooks["slow_s"]))
    target = hooks.get("exit_on_id")
    if not target or target not in ids:
        return
    state = hooks["state_dir"]
    os.makedirs(state, exist_ok=True)
    if len([n for n in os.listdir(state) if n.startswith("exit-")]) >= int(hooks.get("max_exits", 1)):
        return
    with open(os.path.join(state, f"exit-{os.getpid()}-{len(os.listdir(state))}"), "w") as fh:
        fh.write(target)
    os._exit(17)  # a crash, not an exception: no cleanup, the actor process is gone


def _log_scored(path: str, cols: dict, forward_calls: int) -> None:
    import json

    line = json.dumps({"pid": os.getpid(), "ids": [str(i) for i in cols["id"]],
                       "views": [str(v) for v in cols.get("view", [])], "forward_calls": int(forward_calls)})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())  # one write with O_APPEND: lines of concurrent actors do not mix
    finally:
        os.close(fd)


def default_threads(actors: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, actors))
