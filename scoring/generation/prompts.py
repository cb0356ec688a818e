"""The prompts each text-only method sends, for a completions endpoint (a base model continues the text) and for a
chat endpoint (an instruction as the user's message). They are the methods' own where the papers published them,
quoted from their code (docs/text-only.md names the source of each), and every one can be replaced with
`--prompts FILE.yaml` (same keys; a field left out keeps its default).

Placeholders are `{name}` and are filled by plain replacement (no other brace in a template has a meaning):
  continuation   {prefix}            the first part of the passage
  paraphrase     {passage}           the passage (DE-COP asks for three paraphrases in one answer)
  decop          {source} {options}  what the passage claims to be from; the four options, "A. ..." per line
  name_cloze     {passage}           the passage with its one name replaced by [MASK]
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

# N-gram coverage (Hallinan et al.): the blank template for base models (their default, index 1) and their
# WikiMIA instruction for chat models (index 2).
CONTINUATION = {"completion": "{prefix}",
                "chat": "Continue the generation as closely to verbatim as possible.\n\n{prefix}"}

# DE-COP's paraphrase prompt, as its authors report it (Duarte et al.; quoted in Hallinan et al.'s DE-COP
# baseline). One answer holds the three paraphrases, labelled Example B, C and D.
PARAPHRASE = ("Rewrite this entire text (all sentences with no exception) expressing the same meaning using "
              "different words. Aim to keep the rewriting similar in length to the original text.\n"
              "Do it three times. The text to be rewritten is identified as <Example A>.\n"
              "Format your output as:\n"
              "Example B: <insert paraphrase B>\n\n"
              "Example C: <insert paraphrase C>\n\n"
              "Example D: <insert paraphrase D>\n\n"
              "-\n"
              "Example A: {passage}")

# DE-COP's multiple-choice question in the sample-level wording of Hallinan et al.'s adaptation ("... verbatim
# from an existing {source}?"), and its exam instruction for chat models (Duarte et al.'s QA_prompt).
DECOP_QUESTION = "Question: Which of the following passages is verbatim from an existing {source}?\nOptions:\n{options}"
DECOP_EXAM = ("You are entering a multiple choice questions exam. You should directly answer each question by "
              "choosing the correct option. Be concise and straight to the point in your answer. Output only the "
              "letter corresponding to the correct answer.")

# Name cloze (Chang et al., "Speak, Memory"), byte for byte as their script sends it (its odd spacing included);
# the passage goes where their `%s` was.
NAME_CLOZE = ('You have seen the following passage in your training data. What is the proper name that fills in the '
              '[MASK] token in it?  This name is exactly one word long, and is a proper name (not a pronoun or any '
              'other word). You must make a guess, even if you are uncertain.   \n\n  Example:\n\n  Input: "Stay '
              'gold, [MASK], stay gold."\n  Output: <name>Ponyboy</name>\n\n  Input: "The door opened, and [MASK], '
              'dressed and hatted, entered with a cup of tea."\n  Output: <name>Gerty</name>\n\n  Input: {passage}\n'
              '  Output: \n\n')

DEFAULTS: dict[str, dict[str, str]] = {
    "continuation": dict(CONTINUATION),
    "paraphrase": {"completion": PARAPHRASE + "\n\nExample B:", "chat": PARAPHRASE},
    "decop": {"completion": DECOP_QUESTION + "Answer: ", "chat": DECOP_EXAM + "\n" + DECOP_QUESTION + "Answer: ",
              "source": "text"},
    "name_cloze": {"completion": NAME_CLOZE, "chat": NAME_CLOZE},
}


def merged(overrides: Mapping | None) -> dict[str, dict[str, str]]:
    """The defaults with `overrides` ({kind: {completion|chat|source: template}}) laid over them; an unknown kind or
    field is an error (a typo would otherwise be a silent default)."""
    out = {k: dict(v) for k, v in DEFAULTS.items()}
    for kind, fields in (overrides or {}).items():
        if kind not in out:
            raise ValueError(f"--prompts: unknown prompt kind {kind!r}; kinds: {', '.join(out)}")
        if not isinstance(fields, Mapping):
            raise ValueError(f"--prompts: {kind} must map completion/chat to a template")
        for field, text in fields.items():
            if field not in out[kind]:
                raise ValueError(f"--prompts: {kind} has no field {field!r}; fields: {', '.join(out[kind])}")
            out[kind][field] = str(text)
    return out


def load_prompts(path: str | None) -> dict[str, dict[str, str]]:
    """`--prompts FILE.yaml` merged over the defaults (None: the defaults)."""
    if not path:
        return merged(None)
    import yaml

    return merged(yaml.safe_load(Path(path).read_text()) or {})


def render(template: str, **fields: str) -> str:
    for name, value in fields.items():
        template = template.replace("{" + name + "}", value)
    return template
