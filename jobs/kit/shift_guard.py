"""The shift guard of dataset inference (Maini et al.): the test compares the suspect set with a validation set
and is valid only where the two are drawn alike apart from training. Before any scoring, the shift audit's blind
classifiers (curation/shift/audit.py: text only, no model, cross-validated) try to tell the two sets' passages
apart; where the lower end of their AUC's 95% interval lies above THRESHOLD, the sets differ in ways any detector
also picks up (time, source, topic, length), so a small p would not show training: the job stops, unless
--allow-shift, and report.json carries the check on every run.

Measured here (tests/jobs/commands/test_dataset_inference.py): sets that differ only by date are refused; an IID
split of one source runs."""
from __future__ import annotations

THRESHOLD = 0.6  # curation.shift.audit's flag: above it a classifier that never sees the model finds a shift


class ShiftRefused(RuntimeError):
    """dataset-inference refuses sets that a model-free classifier tells apart (one line, exit 2)."""


def start(benchmark: str, seed: int, cap: int = 20_000):
    """The blind classifiers on the staged passages (label 1 suspect, 0 validation), in the blind baseline's helper
    process (jobs/kit/blind_baseline.py); `check` waits for it."""
    from jobs.kit.blind_baseline import BlindBaselineJob

    return BlindBaselineJob.from_source({"benchmark": benchmark, "rows_per_part": 1000, "prefix_ids": [], "cap": cap},
                                        seed, None)


def check(job, allow_shift: bool) -> dict:
    """report.json's `shift_check`; raises ShiftRefused where the sets are told apart and --allow-shift is not set."""
    res = job.result_excluding(set())
    if not res:
        return {"checked": False, "why": "too few passages in one of the sets to cross-validate a classifier",
                "threshold": THRESHOLD, "shifted": False, "allowed": allow_shift}
    overall = res["result"]["overall"]
    auc, ci = overall["auc"], list(overall.get("auc_ci") or [None, None])
    shifted = ci[0] is not None and ci[0] > THRESHOLD
    out = {"checked": True, "blind_auc": auc, "auc_ci": ci, "classifier": overall.get("classifier"),
           "passages": overall.get("n"), "threshold": THRESHOLD, "shifted": shifted, "allowed": allow_shift,
           "sample": res.get("sample")}
    if shifted and not allow_shift:
        raise ShiftRefused(
            f"dataset-inference refused: a model-free classifier ({overall.get('classifier')}) tells the suspect set "
            f"from the validation set at AUC {auc:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] (the interval lies above "
            f"{THRESHOLD}): the two sets differ in ways any detector also picks up, so a small p would not show "
            "training. Give a validation set drawn like the suspect set (same source and time), test without one "
            "(--method codec), or pass --allow-shift to run anyway")
    return out


def warning(check_result: dict) -> str | None:
    """The report's first line where the sets were told apart and the run went on (--allow-shift)."""
    if not check_result.get("shifted"):
        return None
    lo, hi = check_result["auc_ci"]
    return (f"The suspect and validation sets are distinguishable without the model: a text-only classifier "
            f"({check_result['classifier']}) separates them at AUC {check_result['blind_auc']:.2f} [{lo:.2f}, "
            f"{hi:.2f}]. The test's p-value then measures that difference as much as training: it is not evidence "
            "that the suspect set was trained on. (Run with --allow-shift.)")
