"""The optional LLM judge of `overlap --semantic` (issue 57): does a corpus passage hold a benchmark item's problem in
other words? Pure: which pairs to judge, the prompt for a pair, the answer read back as a verdict. The requests go
through scoring/generation's chat path; jobs/parts/overlap/semantic_judge.py runs them.

Why a judge: the verifier (verify.py) counts anchors, so it passes a passage that lists the item's numbers and names
in another problem, and fails a rephrase that spells its numbers in another script. LLM Decontaminator (Yang et al.
2023, "Rethinking Benchmark and Contamination for Language Models with Rephrased Samples") asks a strong model, for
each test item and each of its top-k training neighbours by embedding, whether the two are the same question,
rephrased or translated; its prompts differ by kind of item (math, code, knowledge). Here the passage is a window of
a longer document, so the question is whether the passage *contains* the item's problem.

Which pairs (`to_judge`): each item's decided candidate (decide.Decision.candidate) when
- the verifier flags it: the judge may veto a false flag;
- its decision score is above 0 and at least half the threshold (LOWER_BAR): a near miss the judge may rescue (a
  rephrase that dropped or respelled an anchor);
- it abstains (too few anchors to check) and its window's cosine is at least calibrate.COSINE_FLOOR: the verifier
  cannot tell these apart at all, only a cosine above 0.9 scores, so the judge is the only real check.
Anything else has neither anchors nor closeness to argue for it; judging every item's top k (as LLM Decontaminator
does) would multiply the calls by k for pairs the embedding and the anchors already call unrelated.

Kind (`kind_of`), the first rule that holds:
- code: a line of code (def/class/import/return/#include/function..., a line ending in `{`, `}` or `;`, a ``` fence, a
  >>> prompt), a request to write a function/program/method/class/script/query, or a snake_case identifier or a call
  of a name that is not a common math function (`sqrt(` is math, `sort_by(` is code);
- math: LaTeX math ($...$, \\frac, ...); or a number (anchors.numbers: digits or English number words) with a word
  that asks for a quantity (how many/much/long/old/far, find, calculate, compute, solve, evaluate, simplify, prove,
  total, sum, product, average, percent); or two numbers or more and a `?` (one number and a `?` is as often a
  knowledge question with a year in it, "In 1969, who ...?");
- knowledge: everything else.
`--judge-kind` forces one kind for every item (a benchmark of one kind needs no guessing).

Verdict (`parse_verdict`): the answer's first word, after a reasoning model's <think> block, Markdown emphasis, quotes
and a leading "Answer:" label: yes/true -> "yes", no/false -> "no" (LLM Decontaminator's prompts ask for True/False;
a model primed by them may still say so); anything else -> "unparsed", which counts as not rephrased.
"""
from __future__ import annotations

import hashlib
import json
import re

from scoring.semantic.anchors import numbers
from scoring.semantic.calibrate import COSINE_FLOOR

KINDS = ("math", "code", "knowledge")
LOWER_BAR = 0.5  # a pair is judged from this share of the threshold up (see the module docstring)
MAX_TOKENS = 32  # a verdict is one word; the rest of the answer (a reason) is kept, not read
TEMPERATURE = 0.0  # the same pair gets the same answer, so a cached answer is the answer

NOUN = {"math": "math problem", "code": "programming task", "knowledge": "question"}
SYSTEM = {
    "math": "You check whether a math problem from a benchmark appears in a passage of a text corpus. Answer \"yes\" "
            "if the passage contains the same problem: the same question about the same quantities, even if it is "
            "reworded, reordered, uses other names, spells the numbers differently or is in another language. Answer "
            "\"no\" if it is a different problem, including one of the same style with other numbers, or one that "
            "only shares some numbers or names.",
    "code": "You check whether a programming task from a benchmark appears in a passage of a text corpus. Answer "
            "\"yes\" if the passage contains the same task or a solution to it: a program with the same behaviour "
            "asked for or written, even if reworded, with other variable or function names, or in another natural "
            "or programming language. Answer \"no\" if it is a different task, even one on the same topic.",
    "knowledge": "You check whether a question from a benchmark appears in a passage of a text corpus. Answer \"yes\" "
                 "if the passage contains the same question (with or without its answer options), even if it is "
                 "reworded, reordered or in another language. Answer \"no\" if the passage only covers the same "
                 "topic, or states a fact the question asks about without asking it.",
}
TAIL = ("The passage is a window cut from a longer document: it may start or end mid-sentence and hold other text; "
        "judge only whether the {noun} is somewhere in it. Start your answer with \"yes\" or \"no\".")
USER = ("Benchmark {noun}:\n<<<\n{item}\n>>>\n\nCorpus passage:\n<<<\n{passage}\n>>>\n\n"
        "Does the corpus passage contain the same {noun}? Answer yes or no.")

CODE_LINE = re.compile(r"^\s*(?:def |class |import |from \S+ import |return\b|#include|function\b|public |"
                       r"(?:const|let|var) \w+ =)|[{};]\s*$|^\s*```|^\s*>>> ", re.MULTILINE)
CODE_ASK = re.compile(r"\bwrite (?:a|an) (?:\w+ ){0,3}?(?:function|program|method|class|script|query)\b", re.I)
SNAKE = re.compile(r"\b[A-Za-z]\w*_\w*[A-Za-z0-9]\b")
CALL = re.compile(r"\b([A-Za-z_]\w+)\(")
MATH_FUNCTIONS = frozenset("sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp sqrt max min gcd "
                           "lcm abs floor ceil mod det".split())
MATH_ASK = re.compile(r"\bhow (?:many|much|long|old|far)\b|\b(?:find|calculate|compute|solve|evaluate|simplify|prove|"
                      r"total|sum|product|average|percent(?:age)?)\b|%", re.I)
LATEX = re.compile(r"\$[^$\n]+\$|\\(?:frac|sqrt|sum|int|cdot|times)\b")
THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S | re.I)
LABEL = re.compile(r"^(?:final answer|answer|verdict|response)\s*[:\-]\s*", re.I)
FIRST_WORD = re.compile(r"[a-z]+")
YES, NO = frozenset({"yes", "true"}), frozenset({"no", "false"})


def is_code(text: str) -> bool:
    if CODE_LINE.search(text) or CODE_ASK.search(text) or SNAKE.search(text):
        return True
    return any(name.lower() not in MATH_FUNCTIONS for name in CALL.findall(text))


def kind_of(item: str, forced: str = "auto") -> str:
    """The prompt kind for an item: `forced` unless it is "auto", else the module docstring's rule."""
    if forced != "auto":
        if forced not in KINDS:
            raise ValueError(f"judge kind must be auto or one of {', '.join(KINDS)}; got {forced!r}")
        return forced
    if is_code(item):
        return "code"
    nums = numbers(item)
    if LATEX.search(item) or (nums and MATH_ASK.search(item)) or (len(nums) >= 2 and "?" in item):
        return "math"
    return "knowledge"


def messages(kind: str, item: str, passage: str) -> tuple[str, str]:
    """(system, user) messages for one pair."""
    noun = NOUN[kind]
    return SYSTEM[kind] + " " + TAIL.format(noun=noun), USER.format(noun=noun, item=item.strip(),
                                                                    passage=passage.strip())


def prompt_digest(kind: str) -> str:
    """The digest of a kind's prompt templates and sampling: which version of the prompt an answer was given to."""
    canon = json.dumps({"system": SYSTEM[kind], "tail": TAIL, "user": USER, "noun": NOUN[kind],
                        "max_tokens": MAX_TOKENS, "temperature": TEMPERATURE}, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def parse_verdict(answer: str | None) -> str:
    """"yes", "no" or "unparsed" from the judge's raw answer (the module docstring's rule)."""
    text = THINK.sub(" ", answer or "").strip().lstrip("*_`\"'“‘([-> \t\n").strip()
    text = LABEL.sub("", text).lstrip("*_`\"'“‘([ \t\n").lower()
    m = FIRST_WORD.match(text)
    word = m.group() if m else ""
    return "yes" if word in YES else "no" if word in NO else "unparsed"


def to_judge(decision, threshold: float) -> bool:
    """Whether an item's decided pair is judged (the module docstring's rule); never without a candidate."""
    c, v, score = decision.candidate, decision.verdict, decision.decision_score
    if c is None:
        return False
    if score > 0.0 and score >= threshold * LOWER_BAR:  # flagged (score >= threshold) or a near miss
        return True
    return bool(v is not None and v.abstain and c.cosine >= COSINE_FLOOR)


def rephrased(verifier_flag: bool, verdict: str | None) -> bool:
    """The item's decision with a judge: its verdict where it gave one ("unparsed" is not a yes), else the
    verifier's (an item the rule does not judge is never flagged by the verifier, so it stays unflagged; one left
    out by the budget, or whose request failed, keeps the verifier's decision)."""
    return verdict == "yes" if verdict is not None else verifier_flag
