"""Name cloze (Chang et al., EMNLP 2023, "Speak, Memory"): a passage that names exactly one person has the name
masked, and the model is asked for it (their prompt, greedy). Score 1 when its answer (inside <name>...</name>,
else the answer stripped of tags) is the name, ignoring case; else 0. Passages without exactly one name are not
asked (scoring/generation/names.py: spaCy's PERSON entities where installed, else the capitalised-word rule;
`ner` picks). A set's accuracy is the mean. Larger = member."""
from scoring.detectors.base import register
from scoring.generation.kinds import kind_key
from scoring.generation.names import name_matches


def cloze_kind(params) -> tuple[str, ...]:
    return (kind_key("name_cloze", ner=params["ner"]),)


@register("name_cloze", input="generations", needs=cloze_kind, optional={"ner": "auto"})
def name_cloze(row, gens, ner):
    """1.0 when the model names the masked name exactly (case-insensitive), else 0.0."""
    (answer,) = gens[cloze_kind({"ner": ner})[0]]
    return 1.0 if name_matches(answer["text"], answer["target"]) else 0.0
