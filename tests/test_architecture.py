"""The shape the code must keep (issue 31, README "Design"): read from the source with `ast`, no import needed.
- no import cycle between modules of jobs/, curation/ and scoring/ (imports inside functions count: they hide
  cycles, they do not remove them);
- no module imports another module's private (_underscored) name: what another module needs is public;
- Ray is imported in jobs/ only: curation/ and scoring/ run where Ray is not installed (the GPU machine);
- no module past 400 lines;
- scoring/ writes no file: it returns tables, strings and PNG bytes, and the jobs write them;
- the layers import one way: jobs/ -> curation/ -> scoring/. scoring/ (models, detectors, statistics) imports
  neither of the others; curation/ uses scoring's statistics and masked LM, never jobs/;
- test files mirror the package layout: tests/<package>/<room>/test_*.py names a room that exists."""
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


def test_no_import_cycles_among_the_benches():
    """bench/ is not a package the tool imports, but its modules import each other's helpers: none both ways."""
    mods = {f"bench.{f.stem}": f for f in (ROOT / "bench").glob("*.py")}
    assert cycles(imports(mods)[0]) == []


def test_no_module_imports_another_modules_private_names():
    assert PRIVATE == []


def test_ray_is_imported_in_jobs_only():
    assert sorted(m for m, roots in TOPS.items() if "ray" in roots and not m.startswith("jobs")) == []


def test_modules_stay_small():
    assert sorted(m for m, path in MODS.items() if len(path.read_text().splitlines()) > 400) == []


# Calls that put bytes on a disk. `open` counts when its mode writes; everything else by the name called.
WRITING_CALLS = {"savefig", "write_text", "write_bytes", "write_table", "write_dataset", "save_pretrained", "mkdir",
                 "makedirs", "to_parquet", "rename", "unlink", "rmtree", "atomic_write_text", "atomic_write_bytes",
                 "atomic_write_parquet"}


def file_writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name in WRITING_CALLS or (owner == "os" and name in ("write", "replace", "open")):
            found.append(f"{path.name}:{node.lineno} {name}")
        elif name == "open":
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+"):
                found.append(f"{path.name}:{node.lineno} open({mode.value!r})")
    return found


def test_the_write_finder_finds_writes(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\nopen(p, 'wb')\nopen(p)\nfig.savefig(p)\nos.replace(a, b)\nx.read_text()\n")
    assert [w.split(" ", 1)[1] for w in file_writes(src)] == ["open('wb')", "savefig", "replace"]


# The one exception: a figure rendered into an in-memory buffer (scoring/reports/figures.png_bytes).
IN_MEMORY = {"figures.py": {"savefig"}}


def test_scoring_writes_no_file():
    writes = [w for m, path in MODS.items() if m.startswith("scoring") for w in file_writes(path)]
    assert [w for w in writes if w.split(" ")[1] not in IN_MEMORY.get(w.split(":")[0], ())] == []


def test_data_flows_one_way():
    upstream = {"curation": {"jobs"}, "scoring": {"jobs", "curation"}}
    wrong = sorted((m, d) for m, deps in EDGES.items() for d in deps
                   if d.split(".")[0] in upstream.get(m.split(".")[0], ()))
    assert wrong == []


def test_test_files_mirror_the_package_layout():
    tests = ROOT / "tests"
    misplaced = []
    for f in tests.rglob("test_*.py"):
        room = f.parent.relative_to(tests)
        if room.parts and room.parts[0] in PACKAGES and not (ROOT / room / "__init__.py").is_file():
            misplaced.append(str(f.relative_to(ROOT)))
        elif room.parts and room.parts[0] not in PACKAGES:
            misplaced.append(str(f.relative_to(ROOT)))
    assert misplaced == []


def test_the_config_walk_finds_a_config_passed_up_and_a_callback_called_from_below(tmp_path, monkeypatch):
    """tests/config_walk.py on a two-module tree: the finder can fail."""
    import config_walk as cw

    for pkg in ("jobs", "jobs/commands", "jobs/plane"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "jobs/commands/job.py").write_text(
        "from jobs.plane.loop import run\n\n"
        "def start(cfg):\n    return run(cfg.n, spec_for=lambda text: spec(cfg, text))\n\n"
        "def spec(cfg, text):\n    return text\n\n"
        "def again(cfg):\n    return cfg\n")
    (tmp_path / "jobs/plane/loop.py").write_text(
        "def run(n, *, spec_for):\n    return spec_for('x')\n\n"
        "def down(c):\n    from jobs.commands.job import again\n    return again(c)\n")
    monkeypatch.setattr(cw, "ROOT", tmp_path)
    for f in (cw.module_tree, cw.definitions):
        f.cache_clear()
    try:
        w = cw.walk("jobs.commands.job", "start")
        assert w.climbs == [("jobs.plane.loop:run", "jobs.commands.job:<spec_for>")]
        w2 = cw.walk("jobs.plane.loop", "down", "c")
        assert w2.climbs == [("jobs.plane.loop:down", "jobs.commands.job:again")]
        assert set(w2.rooms) == {"jobs.plane.loop", "jobs.commands.job"}
    finally:
        for f in (cw.module_tree, cw.definitions):
            f.cache_clear()


def test_evaluate_resolves_its_config_at_the_top():
    """Issue 51: `evaluate`'s config (local, Ray, served and text-only paths) is read by the command and passed down
    as what each layer needs; nothing lower passes it back up or calls back into a closure over it (3312d90: four
    such climbs by this walk, three of them the part loop calling evaluate's spec, fingerprint and blind-baseline
    closures)."""
    import config_walk as cw

    w = cw.walk(*cw.EVALUATE)
    assert w.climbs == [], w.climbs
    assert not [m for m in w.rooms if m.startswith("jobs.parts")], w.rooms  # the parts take resolved values


def test_the_plane_takes_its_runner_from_the_job():
    """Where the plane runs is an argument the command hands down (jobs/plane/runners.py), not a module switch."""
    import inspect

    from jobs.parts.text_only.evaluation import generate_benchmark
    from jobs.plane.part_loop import plan_benchmark, run_parts, score_benchmark, score_planned
    from jobs.plane.survey import run_survey

    for fn in (plan_benchmark, score_planned, score_benchmark, run_parts, run_survey, generate_benchmark):
        p = inspect.signature(fn).parameters["runner"]
        assert p.default is inspect.Parameter.empty, fn.__name__
    import jobs.plane.local_plane as local_plane

    assert not hasattr(local_plane, "is_local") and not hasattr(local_plane, "local_plane")


def test_nothing_below_a_command_imports_a_command():
    """jobs/parts, jobs/kit and jobs/plane are below the commands: they take what a command resolved and never
    import one (the text-only evaluation's parts once ran `tidemark trace` from below; the trace study, which drives
    whole commands, lives in bench/)."""
    edges, _, _ = imports(modules())
    below = [(m, d) for m, deps in edges.items() if m.startswith(("jobs.parts", "jobs.kit", "jobs.plane"))
             for d in deps if d.startswith("jobs.commands")]
    assert below == []


def test_the_plane_and_the_kit_do_not_import_the_parts():
    """jobs/parts is above jobs/plane and jobs/kit (README "Design"): a part kind plugs into the plane, the plane
    never reaches up for one (the benchmark rows the survey and the pool read live in jobs/plane)."""
    edges, _, _ = imports(modules())
    up = [(m, d) for m, deps in edges.items() if m.startswith(("jobs.kit", "jobs.plane"))
          for d in deps if d.startswith("jobs.parts")]
    assert up == []


def room_of(module: str) -> str:
    """jobs.parts.impact.records -> jobs.parts.impact (its room); a command or any other module is its own room."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["jobs", "parts"] and len(parts) > 3 else module


def test_the_parts_are_rooms_by_capability():
    """Issue 56: jobs/parts holds one package (a room) per capability, as scoring/ does (impact/, trace/, index/,
    audit/, ...), each saying in its docstring what it holds; a module left at the top of jobs/parts is one that
    several rooms or commands read (doc_inputs), and the rooms import one another without a circle, so that a
    change has one room to go to."""
    parts = ROOT / "jobs" / "parts"
    rooms = sorted(d.name for d in parts.iterdir() if d.is_dir() and (d / "__init__.py").is_file())
    assert len(rooms) >= 8, rooms
    for room in rooms:
        assert ast.get_docstring(ast.parse((parts / room / "__init__.py").read_text())), room
    loose = sorted(f.stem for f in parts.glob("*.py") if f.stem != "__init__")
    readers = {stem: {room_of(m) for m, deps in EDGES.items() if f"jobs.parts.{stem}" in deps} for stem in loose}
    assert {s: sorted(r) for s, r in readers.items() if len(r) < 2} == {}
    room_edges: dict[str, set[str]] = {}
    for m, deps in EDGES.items():
        if m.startswith("jobs.parts."):
            room_edges.setdefault(room_of(m), set()).update(
                room_of(d) for d in deps if d.startswith("jobs.parts.") and room_of(d) != room_of(m))
    assert cycles(room_edges) == []


def test_the_room_test_finds_a_loose_module_and_a_circle_of_rooms():
    assert room_of("jobs.parts.impact.records") == "jobs.parts.impact"
    assert room_of("jobs.parts.doc_inputs") == "jobs.parts.doc_inputs"
    assert room_of("jobs.commands.audit") == "jobs.commands.audit"
    assert cycles({"jobs.parts.trace": {"jobs.parts.index"}, "jobs.parts.index": {"jobs.parts.trace"}}) != []
