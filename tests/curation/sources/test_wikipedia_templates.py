"""Wikitext as the article reads: inline templates rendered from the rule table, the punctuation of dropped ones
repaired, tables of every form removed without losing the article, refs/comments never in the text, math kept as
TeX, entities decoded; and on real enwiki articles, the defect share and the articles lost."""
from __future__ import annotations

import json

import pytest

from curation.release.text_defects import defects, measure
from curation.sources.wikipedia.wikitext import drop_tables, repair_punctuation, text_or_reason, wikitext_to_text


@pytest.mark.parametrize("wikitext,text", [
    # dashes and spaces
    ("1775{{ndash}}1783 and a{{mdash}}b", "1775–1783 and a—b"),
    ("2.5{{nbsp}}million and X{{snd}}Y", "2.5 million and X – Y"),
    # convert, val, frac
    ("The building is {{convert|256|m|ft}} tall.", "The building is 256 m tall."),
    ("a range of {{convert|10|to|20|km|mi}} and {{cvt|5|-|8|C}}", "a range of 10 to 20 km and 5–8 °C"),
    ("He was {{convert|5|ft|11|in|cm}} tall.", "He was 5 ft 11 in tall."),
    ("roughly {{val|1.496|e=11|u=m}} away", "roughly 1.496×1011 m away"),
    ("{{frac|3|1|2}} cups, {{frac|1|4}} and {{frac|8}}", "3 1/2 cups, 1/4 and 1/8"),
    # languages and names
    ("Germany ({{lang-de|Deutschland}}), officially", "Germany (German: Deutschland), officially"),
    ("Piedmont ({{IPAc-en|p|iː|d}}; {{langx|it|Piemonte}})", "Piedmont (Italian: Piemonte)"),
    ("Savas Dimopoulos ({{lang|el|Σάββας Δημόπουλος}}; born 1952)", "Savas Dimopoulos (Σάββας Δημόπουλος; born 1952)"),
    ("Islamabad ({{IPA|ɪsˈlɑːm}}; {{transl|ur|Islāmābād}})", "Islamabad (Islāmābād)"),
    ("{{nihongo|Tokyo|東京|Tōkyō}} is", "Tokyo (東京, Tōkyō) is"),
    # dates and times
    ("born {{birth date|1952|3|5}} in", "born March 5, 1952 in"),
    ("born {{birth date and age|1952|3|5|df=y}} in", "born 5 March 1952 in"),
    ("died {{death date and age|2000|1|10|1930|6|2}}.", "died January 10, 2000 (aged 69)."),
    ("{{As of|2010|3}}, the city", "As of March 2010, the city"),
    ("built {{circa|1900}} by", "built c. 1900 by"),
    # wrappers
    ("{{nowrap|New York}} and {{small|(small)}} {{sic|teh}} {{abbr|NASA|National}}",
     "New York and (small) teh NASA"),
    ("a {{mvar|x}} and {{math|2 + 2}}", "a x and 2 + 2"),
    # unknown and pronunciation templates: gone, with their separators
    ("France ({{IPAc-en|f|r|ɑː|n|s}} or {{IPAc-en|f|r|æ|n|s}}; {{IPA-fr|fʁɑ̃s}}), officially", "France, officially"),
    ("Apple designs and sells {{vanchor|smartphones}}, {{unknown template|x}} kitchen appliances",
     "Apple designs and sells smartphones, kitchen appliances"),
    ("It cost {{US$|1.2 million}} in 1999{{snd}}a record.", "It cost US$1.2 million in 1999 – a record."),
    ("Mercedes-Benz ({{IPA-de|ˌmɛʁˈtseː.dəs}}) is", "Mercedes-Benz is"),
])
def test_templates_render_as_the_article_shows_them(wikitext, text):
    assert wikitext_to_text(wikitext) == text


@pytest.mark.parametrize("table", [
    '{| class="wikitable"\n|-\n| a || b\n|}',
    ':{| class="wikitable"\n| indented\n|}',
    '{|{{Infobox Aircraft Begin\n| name = X\n}}\n|}',
    '{| style="{{float right}}"\n| a\n{| \n| nested\n|}\n| b\n|}',
])
def test_tables_of_every_form_go_and_the_article_stays(table):
    text, reason, _ = text_or_reason(f"Before the table.\n{table}\nAfter the table.")
    assert reason is None and text == "Before the table.\n\nAfter the table."


def test_refs_comments_math_and_entities():
    wikitext = ("A claim.<ref>{{cite web|title=Secret source}} more text</ref> Next.<!-- hidden note --> "
                "So that <math>x^2 + y^2 = z^2</math> holds, see [[Kruskal&ndash;Wallis test|Kruskal&ndash;Wallis]].")
    assert wikitext_to_text(wikitext) == ("A claim. Next. So that $x^2 + y^2 = z^2$ holds, see Kruskal–Wallis.")


def test_punctuation_repair_leaves_real_parentheses_alone():
    assert repair_punctuation("X (; ; born 1952) and Y (, ) and Z (born 1 May) .") == \
        "X (born 1952) and Y and Z (born 1 May)."
    assert drop_tables("a\n{|\n|x\n|}\nb") == "a\n\nb"


def test_the_defect_measure_finds_holes_and_markup():
    assert set(defects("Germany (), officially")) == {"empty_parens"}
    assert set(defects("exceed an altitude of . It")) == {"dangling_function_word"}
    assert set(defects("coronavirus&nbsp;2 and {{cite}}")) == {"markup"}
    assert defects("A clean sentence (with words), and a formula $\\frac{a}{b}$.") == {}
    m = measure(["fine text.", "Germany () is", "the building is , containing"])
    assert m["defective"] == 2 and m["share"] == pytest.approx(2 / 3)


def test_real_articles_read_as_rendered(shared_data):
    """../shared/data/wikipedia/real_wikitext.jsonl: 61 whole enwiki articles. The first 32/64/128/256 words of each
    usable one (a WikiMIA-style release): at most 3% defective passages and no article lost (Athena's {{quote}},
    which the parser's italics state swallows, is read by the second parse without style tags). Before this
    renderer: 22% and 3 lost."""
    from curation.text import truncate_words

    articles = [json.loads(line) for line in (shared_data / "wikipedia" / "real_wikitext.jsonl").open()]
    results = [text_or_reason(a["wikitext"]) for a in articles]
    lost = [a["title"] for a, (_, reason, _) in zip(articles, results) if reason]
    assert lost == [], lost
    passages = [truncate_words(t, b) for t, reason, _ in results if not reason for b in (32, 64, 128, 256)]
    m = measure(passages)
    assert m["share"] <= 0.03, m


WIKITEXT = """'''Germany''' ({{IPAc-en|ˈ|dʒ|ɜːr|m|ə|n|i}}; {{lang-de|Deutschland}}, {{IPA-de|ˈdɔʏtʃlant|pron}}), officially \
the [[Federal Republic of Germany]],<ref>{{cite web|title=x}}</ref> is a country in [[Central Europe]]. It \
covers 1871{{ndash}}1945 and more.

The relation is <math>a^{2}+b^{2}=c^{2}</math> for right triangles, see [[Kruskal&ndash;Wallis test|Kruskal&ndash;Wallis]].
"""
# The same revision as MediaWiki's legacy parser renders it (its markup for IPA, lang-xx, references, math).
RENDERED = """<div class="mw-parser-output"><p><b>Germany</b> (<span class="rt-commentedText nowrap"><span \
class="IPA nopopups noexcerpt" lang="en-fonipa"><a href="/wiki/Help:IPA/English" title="Help:IPA/English">/<span \
style="border-bottom:1px dotted"><span title="/ˈ/: primary stress follows">ˈ</span><span title="/dʒ/: 'j' in 'jam'">\
dʒ</span></span>/</a></span></span>; German: <i lang="de">Deutschland</i>, <span class="IPA" lang="de-fonipa"><a \
href="/wiki/Help:IPA/Standard_German">[ˈdɔʏtʃlant]</a></span><span class="noprint"> <span class="unicode haudio">\
<a href="/wiki/File:De-Deutschland.ogg">listen</a></span></span>), officially the <a \
href="/wiki/Federal_Republic_of_Germany">Federal Republic of Germany</a>,<sup id="cite_ref-1" class="reference"><a \
href="#cite_note-1">[1]</a></sup> is a country in <a href="/wiki/Central_Europe">Central Europe</a>. It covers \
1871–1945 and more.</p>
<p>The relation is <span class="mwe-math-element"><span class="mwe-math-mathml-inline mwe-math-mathml-a11y" \
style="display: none;"><math xmlns="http://www.w3.org/1998/Math/MathML" alttext="{\\displaystyle a^{2}+b^{2}=c^{2}}">\
<semantics><mrow><msup><mi>a</mi><mn>2</mn></msup></mrow></semantics></math></span><img src="x.svg" \
class="mwe-math-fallback-image-inline" alt="{\\displaystyle a^{2}+b^{2}=c^{2}}"></span> for right triangles, see <a \
href="/wiki/Kruskal%E2%80%93Wallis_test">Kruskal–Wallis</a>.</p></div>"""


def test_the_dump_and_the_api_give_the_same_text_for_the_same_revision():
    """Pronunciations gone with their separators, the language label kept, the citation marker gone, the formula
    as $TeX$ in both; {{convert}} is the one known difference (the rendered page adds the computed conversion)."""
    from curation.sources.wikipedia.api import html_to_text

    expected = ("Germany (German: Deutschland), officially the Federal Republic of Germany, is a country in Central "
                "Europe. It covers 1871–1945 and more.\n\n"
                "The relation is $a^{2}+b^{2}=c^{2}$ for right triangles, see Kruskal–Wallis.")
    assert wikitext_to_text(WIKITEXT) == expected
    assert html_to_text(RENDERED) == expected
