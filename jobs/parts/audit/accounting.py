"""The audit's bookkeeping after the scores are in: the per-document evidence rows of report.json, the accounting
that every document and snippet in is scored or quarantined (per role), the quarantine's reason counts and the
warnings a reader needs before trusting the rates. Plain Python over what jobs/parts/audit/results.py returns."""
from __future__ import annotations

import numpy as np


def document_rows(listed, codes, top_ids: dict, where: dict, score_of: dict, threshold: float, texts: dict,
                  with_ngrams: bool) -> list[dict]:
    """report.json's documents: each listed document's rate with its CI, its top snippets as evidence (text,
    position, score, flagged) and, with a reference corpus, its n-gram overlap."""
    rows = []
    for d, code in zip(listed.to_pylist(), codes.tolist()):
        row = {"id": d["id"], "n_snippets": d["n_snippets"], "n_flagged": d["n_flagged"], "rate": d["rate"],
               "rate_ci": [d["rate_lo"], d["rate_hi"]], "max_score": d["max_score"], "path": d["path"],
               "n_words": d["n_words"],
               "top_snippets": [{"index": where[sid]["index"], "start_word": where[sid]["start_word"],
                                 "score": score_of[sid], "flagged": bool(score_of[sid] >= threshold),
                                 "text": texts[sid]}
                                for sid in top_ids.get(code, [])]}
        if with_ngrams:
            row["ngram_overlap"] = {"n_ngrams": d["ngram_n_ngrams"], "n_matched": d["ngram_n_matched"],
                                    "share": d["ngram_share"], "examples": d["ngram_examples"]}
        rows.append(row)
    return rows


def account(staged: list[dict], n_staged: dict, roles: dict, scored_documents: dict, quarantine: list[dict],
            document_drops: list[tuple]) -> dict:
    """Counts per role (documents in = scored + quarantined; snippets planned = scored + quarantined), after adding
    the documents dropped at scoring (`document_drops`: (ids, role, reason, detail)) to `quarantine`. Raises when
    a role does not reconcile."""
    for ids, role, reason, detail in document_drops:
        quarantine += [{"id": i, "stage": "score" if reason == "score_failed" else "read", "reason": reason,
                        "detail": detail, "role": role, "unit": "document"} for i in ids]
    staged_q = {r: sum(s["documents_quarantined"] for s in staged if s["role"] == r) for r in n_staged}

    def n_q(role: str, unit: str) -> int:
        return sum(1 for x in quarantine if x["role"] == role and x["unit"] == unit) + (
            staged_q[role] if unit == "document" else 0)

    counts = {}
    for role in ("target", "calibration"):
        counts[role] = {"documents_in": sum(s["documents_in"] for s in staged if s["role"] == role),
                        "documents_scored": scored_documents[role], "documents_quarantined": n_q(role, "document"),
                        "snippets_planned": n_staged[role], "snippets_scored": int(roles[role].scores.size),
                        "snippets_quarantined": n_q(role, "snippet")}
    for part, c in counts.items():  # every input is accounted for, or the run fails loudly
        if c["documents_in"] != c["documents_scored"] + c["documents_quarantined"] or \
                c["snippets_planned"] != c["snippets_scored"] + c["snippets_quarantined"]:
            raise RuntimeError(f"{part} accounting does not reconcile: {c}")
    return counts


def reason_counts(quarantine: list[dict], staged: list[dict]) -> dict:
    """`role/unit/reason` -> count, over the staging tasks' document drops and this run's quarantine."""
    out: dict[str, int] = {}
    for s in staged:
        for reason, n in s["reasons"].items():
            key = f"{s['role']}/document/{reason}"
            out[key] = out.get(key, 0) + n
    for x in quarantine:
        key = f"{x['role']}/{x['unit']}/{x['reason']}"
        out[key] = out.get(key, 0) + 1
    return out


def audit_warnings(words: dict, auc: float, calib, n_documents: int, n_listed: int) -> list[str]:
    """What a reader must know before trusting the rates: snippets of different lengths on the two sides of the
    threshold, a detector that barely separates the calibration sets, too few calibration snippets, a cut list."""
    warnings = []
    med_t = float(np.median(words["target"])) if words["target"].size else float("nan")
    med_c = float(np.median(words["calibration"])) if words["calibration"].size else float("nan")
    if np.isfinite(med_t) and np.isfinite(med_c) and max(med_t, med_c) > 1.5 * min(med_t, med_c):
        warnings.append(f"calibration snippets (median {med_c:.0f} words) and target snippets (median {med_t:.0f} "
                        "words) differ in length; detector scores depend on length, so the threshold may not transfer")
    if not auc > 0.6:
        warnings.append(f"calibration AUC is {auc:.3f}: the detector barely separates known members from non-members "
                        "for this model, so rates are mostly noise")
    n_small = min(calib.n_members, calib.n_non_members)
    if n_small < 20:
        warnings.append(f"only {n_small} calibration snippets in the smaller class: TPR/FPR are rough")
    if n_documents > n_listed:
        warnings.append(f"report.json lists the {n_listed} documents with the highest max score of "
                        f"{n_documents}; documents.parquet holds them all")
    return warnings
