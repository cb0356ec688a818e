"""Plain text corpora for reference statistics: a .txt file (one document), a .jsonl (`text` or `input`), or a
directory of them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


def iter_texts(path: str | Path) -> Iterator[str]:
    p = Path(path)
    files = sorted(x for x in p.rglob("*") if x.suffix in (".txt", ".jsonl")) if p.is_dir() else [p]
    for f in files:
        if f.suffix == ".jsonl":
            with open(f, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.strip():
                        obj = json.loads(line)
                        text = obj.get("text") or obj.get("input") or ""
                        if text:
                            yield text
        else:
            yield f.read_text(encoding="utf-8", errors="replace")
