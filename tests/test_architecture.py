"""The shape the code must keep (issue 31, README "Design"): read from the source with `ast`, no import needed.
- no import cycle between modules of jobs/, curation/ and scoring/ (imports inside functions count: they hide
  cycles, they do not remove them);
- no module imports another module's private (_underscored) name: what another module needs is public;
- Ray is imported in jobs/ only: curation/ and scoring/ run where Ray is not installed (the GPU machine);
- no module past 400 lines."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jobs", "curation", "scoring")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for f in (ROOT / package).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = f
    return found


def imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], list[tuple[str, str, str]], dict[str, set[str]]]:
    """(module -> the modules it imports, (importer, module, private name) triples, module -> top-level packages)."""
    edges, private, tops = {}, [], {}
    for name, path in mods.items():
        deps, roots = set(), set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots.add(node.module.split(".")[0])
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in mods:
                        deps.add(full)
                    elif node.module in mods:
                        deps.add(node.module)
                        if alias.name.startswith("_"):
                            private.append((name, node.module, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    roots.add(alias.name.split(".")[0])
                    if alias.name in mods:
                        deps.add(alias.name)
        deps.discard(name)
        edges[name], tops[name] = deps, roots
    return edges, private, tops


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


MODS = modules()
EDGES, PRIVATE, TOPS = imports(MODS)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(EDGES) == []


def test_no_module_imports_another_modules_private_names():
    assert PRIVATE == []


def test_ray_is_imported_in_jobs_only():
    assert sorted(m for m, roots in TOPS.items() if "ray" in roots and not m.startswith("jobs")) == []


def test_modules_stay_small():
    assert sorted(m for m, path in MODS.items() if len(path.read_text().splitlines()) > 400) == []
