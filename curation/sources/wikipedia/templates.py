"""Inline templates rendered as the article shows them, from a table that is data: template name -> rule.

A dump has no template database, so the text-bearing templates that English Wikipedia uses most are rendered here
(dashes and spaces, {{convert}}, {{val}}, {{frac}}, {{lang}}/{{langx}}/{{lang-xx}}/{{transl}}, {{circa}},
{{nowrap}}, {{small}}, {{sic}}, {{as of}}, birth/death/start dates, {{abbr}}, {{nihongo}}, {{mvar}}/{{math}},
{{chem2}}, {{quote}}, ...). Pronunciation templates ({{IPA}}, {{IPAc-en}}, {{respell}}, audio) and every unknown
template render as nothing; wikitext.py then repairs the punctuation they leave ("()", "(; ;", ", ,").

A rule is one of:
    "text:X"        the literal X
    "param:N"       the value of parameter N (positional "1", "2", ... or a name), rendered
    "last"          the value of the last positional parameter
    "prefix:X|N"    X followed by parameter N
    a function name in RENDERERS (conversions, dates, fractions, language labels)
"""
from __future__ import annotations

from datetime import date
from typing import Callable

RULES: dict[str, str] = {
    # dashes, spaces and characters
    "ndash": "text:–", "mdash": "text:—", "snd": "text: – ", "spnd": "text: – ", "spaced ndash": "text: – ",
    "spaced en dash": "text: – ", "nbsp": "text: ", "thinsp": "text: ", "spaces": "text: ", "space": "text: ",
    "nbhyph": "text:-", "!": "text:|", "=": "text:=", "'": "text:'", "'s": "text:'s", "`": "text:'",
    "endash": "text:–", "en dash": "text:–", "emdash": "text:—", "em dash": "text:—", "anchor": "text:",
    "-": "text:", "clear": "text:", "break": "text:",
    # wrappers whose text is the first parameter
    "nowrap": "param:1", "nobr": "param:1", "small": "param:1", "smaller": "param:1", "big": "param:1",
    "larger": "param:1", "sic": "param:1", "abbr": "param:1", "mvar": "param:1", "var": "param:1",
    "math": "param:1", "em": "param:1", "strong": "param:1", "small caps": "param:1", "sc": "param:1",
    "smallcaps": "param:1", "not a typo": "param:1", "proper name": "param:1", "ill": "param:1",
    "interlanguage link": "param:1", "vanchor": "param:1", "visible anchor": "param:1", "flag": "param:1", "flagcountry": "param:1", "linktext": "join",
    "chem2": "param:1", "chem": "join", "co2": "text:CO2", "h2o": "text:H2O", "overline": "param:1",
    "underline": "param:1", "keypress": "param:1", "lang": "param:2", "transl": "last", "tlit": "last",
    "transliteration": "last", "nihongo": "nihongo", "nihongo2": "param:1", "quote": "quote",
    "blockquote": "quote", "quotation": "quote", "cquote": "quote", "quote box": "quote", "isbn": "prefix:ISBN |1",
    "circa": "prefix:c. |1", "c.": "prefix:c. |1", "us$": "prefix:US$|1", "usd": "prefix:US$|1",
    "£": "prefix:£|1", "gbp": "prefix:£|1", "€": "prefix:€|1", "eur": "prefix:€|1", "¥": "prefix:¥|1", "langx": "langx", "convert": "convert", "cvt": "convert",
    "val": "val", "frac": "frac", "sfrac": "frac", "fraction": "frac", "as of": "as_of", "birth date": "date",
    "death date": "date", "start date": "date", "end date": "date", "birth date and age": "date",
    "start date and age": "date", "birth year and age": "param:1", "death date and age": "death_date_and_age",
    "dts": "date",
}
# Rendered as nothing, on purpose (listed so that a reader of the table sees they were considered).
DROPPED = ("ipa", "ipac-en", "ipa-all", "ipalink", "respell", "audio", "pronunciation", "efn", "sfn", "rp",
           "citation needed", "cn", "coord", "flagicon", "inflation", "efn-ua", "dead link", "webarchive")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
LANGUAGES = {"ar": "Arabic", "bn": "Bengali", "ca": "Catalan", "cs": "Czech", "cy": "Welsh", "da": "Danish",
             "de": "German", "el": "Greek", "en": "English", "es": "Spanish", "fa": "Persian", "fi": "Finnish",
             "fr": "French", "ga": "Irish", "grc": "Ancient Greek", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian",
             "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "la": "Latin", "nl": "Dutch",
             "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
             "sa": "Sanskrit", "sv": "Swedish", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu",
             "vi": "Vietnamese", "zh": "Chinese", "yi": "Yiddish", "pa": "Punjabi", "ta": "Tamil", "sr": "Serbian",
             "hr": "Croatian", "bg": "Bulgarian", "sk": "Slovak", "sl": "Slovene", "lt": "Lithuanian",
             "lv": "Latvian", "et": "Estonian", "is": "Icelandic", "ms": "Malay", "tl": "Tagalog", "sw": "Swahili",
             "hy": "Armenian", "ka": "Georgian", "az": "Azerbaijani", "kk": "Kazakh", "mn": "Mongolian"}
UNITS = {"C": "°C", "F": "°F", "K": "K", "sqmi": "sq mi", "sqft": "sq ft", "sqkm": "km2", "km2": "km2",
         "m2": "m2", "acre": "acres", "ha": "ha", "mph": "mph", "km/h": "km/h", "kph": "km/h", "ft": "ft",
         "m": "m", "km": "km", "mi": "mi", "in": "in", "cm": "cm", "mm": "mm", "kg": "kg", "lb": "lb", "t": "t",
         "LT": "long tons", "ST": "short tons", "nmi": "nmi", "yd": "yd", "l": "L", "L": "L", "USgal": "US gal",
         "impgal": "imp gal", "hp": "hp", "kW": "kW", "MW": "MW", "GW": "GW", "kn": "kn", "e6acre": "million acres",
         "e6km2": "million km2", "e6sqmi": "million sq mi", "ftin": "ft in"}
RANGE_WORDS = {"-": "–", "–": "–", "to": " to ", "and": " and ", "or": " or ", "x": " × ", "by": " by ",
               "+": " + ", "to(-)": " to ", "-to-": " to "}

Render = Callable[[object], str]  # renders a parameter's wikicode to text


def _positional(t, render: Render) -> list[str]:
    return [render(p.value).strip() for p in t.params if not p.showkey]


def _named(t, name: str, render: Render) -> str | None:
    return render(t.get(name).value).strip() if t.has(name) else None


def _convert(t, render: Render) -> str:
    args = _positional(t, render)
    if not args:
        return ""
    out, i = [args[0]], 1
    while i + 1 < len(args) and args[i] in RANGE_WORDS:  # 10|to|20|km, 5|-|8|m
        out.append(RANGE_WORDS[args[i]] + args[i + 1])
        i += 2
    unit = args[i] if i < len(args) else ""
    if unit == "ft" and i + 2 < len(args) and args[i + 2] == "in":  # 5|ft|6|in
        return f"{''.join(out)} ft {args[i + 1]} in"
    return f"{''.join(out)} {UNITS.get(unit, unit)}".strip()


def _val(t, render: Render) -> str:
    args = _positional(t, render)
    text = args[0] if args else ""
    if len(args) > 1 and args[1]:
        text += f"±{args[1]}"
    e = _named(t, "e", render)
    if e:
        text += f"×10{e}"
    unit = _named(t, "u", render) or _named(t, "ul", render)
    return f"{text} {unit}" if unit else text


def _frac(t, render: Render) -> str:
    args = [a for a in _positional(t, render) if a]
    if len(args) == 3:
        return f"{args[0]} {args[1]}/{args[2]}"
    if len(args) == 2:
        return f"{args[0]}/{args[1]}"
    return f"1/{args[0]}" if args else ""


def _ymd(args: list[str]) -> tuple[int, int | None, int | None] | None:
    nums = []
    for a in args[:3]:
        try:
            nums.append(int(a))
        except ValueError:
            break
    if not nums:
        return None
    return nums[0], nums[1] if len(nums) > 1 else None, nums[2] if len(nums) > 2 else None


def _format_date(ymd, day_first: bool) -> str:
    y, m, d = ymd
    if not m or not 1 <= m <= 12:
        return str(y)
    month = MONTHS[m - 1]
    if not d:
        return f"{month} {y}"
    return f"{d} {month} {y}" if day_first else f"{month} {d}, {y}"


def _day_first(t, render: Render) -> bool:
    return (_named(t, "df", render) or "").lower() in ("y", "yes", "1", "true")


def _date(t, render: Render) -> str:
    ymd = _ymd([a for a in _positional(t, render) if a])
    return _format_date(ymd, _day_first(t, render)) if ymd else ""


def _death_date_and_age(t, render: Render) -> str:
    args = [a for a in _positional(t, render) if a]
    death, birth = _ymd(args[:3]), _ymd(args[3:6])
    if not death:
        return ""
    text = _format_date(death, _day_first(t, render))
    if birth and all(death) and all(birth):
        born, died = date(*birth), date(*death)
        age = died.year - born.year - ((died.month, died.day) < (born.month, born.day))
        text += f" (aged {age})"
    return text


def _as_of(t, render: Render) -> str:
    ymd = _ymd([a for a in _positional(t, render) if a])
    if not ymd:
        return ""
    lead = "as of" if (_named(t, "lc", render) or "").lower() in ("y", "yes") else "As of"
    return f"{lead} {_format_date(ymd, _day_first(t, render))}"


def _langx(t, render: Render) -> str:
    args = _positional(t, render)
    if len(args) < 2:
        return ""
    name = LANGUAGES.get(args[0].lower().split("-")[0])
    return f"{name}: {args[1]}" if name else args[1]


def _lang_code(t, render: Render, code: str) -> str:
    args = _positional(t, render)
    if not args:
        return ""
    name = LANGUAGES.get(code.lower().split("-")[0])
    return f"{name}: {args[0]}" if name else args[0]


def _nihongo(t, render: Render) -> str:
    args = _positional(t, render) + ["", "", ""]
    english, native, romaji = args[0], args[1], args[2]
    inside = ", ".join(x for x in (native, romaji) if x)
    if english:
        return f"{english} ({inside})" if inside else english
    return f"{native} ({romaji})" if native and romaji else native or romaji


def _quote(t, render: Render) -> str:
    text = _named(t, "text", render) or _named(t, "quote", render)
    if text is None:
        args = _positional(t, render)
        text = args[0] if args else ""
    return f"\n\n{text}\n\n" if text else ""


def _join(t, render: Render) -> str:
    return "".join(_positional(t, render))


RENDERERS: dict[str, Callable] = {"convert": _convert, "val": _val, "frac": _frac, "date": _date,
                                  "death_date_and_age": _death_date_and_age, "as_of": _as_of, "langx": _langx,
                                  "nihongo": _nihongo, "quote": _quote, "join": _join}


def render_template(t, name: str, render: Render) -> str:
    """The text a template shows in the article ("" for the ones that show none or are unknown)."""
    rule = RULES.get(name)
    if rule is None:
        if name.startswith("lang-") and len(name) > 5:  # {{lang-de|Deutschland}}: "German: Deutschland"
            return _lang_code(t, render, name[5:])
        return ""
    if rule.startswith("text:"):
        return rule[5:]
    if rule.startswith("param:"):
        key = rule[6:]
        return render(t.get(key).value).strip() if t.has(key) else ""
    if rule.startswith("prefix:"):
        prefix, key = rule[7:].split("|", 1)
        return prefix + render(t.get(key).value).strip() if t.has(key) else ""
    if rule == "last":
        args = _positional(t, render)
        return args[-1] if args else ""
    return RENDERERS[rule](t, render)
