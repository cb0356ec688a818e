"""Where a command's config goes (issue 51, "the driver's walk"), read from the source with `ast`.

Start at a function and one of its parameters (evaluate: `jobs.commands.evaluate.run_evaluate`, `cfg`) and follow
the object: every call that passes it (as an argument, as `replace(cfg, ...)`, or as the `self` of a method the
config's classes define) leads into the callee under the callee's own parameter name, and is followed there in
turn. Calls inside nested functions and lambdas count: a closure that hands the config on hands it on. A closure
over the config handed down as an argument (a callback: `spec_for=lambda text: f(cfg, text)`) is followed too:
where the callee calls it, the config is reached again in the closure's module.

- a *room* is a module the config enters;
- a *climb* is a call that reaches it from a lower layer in a higher one: the config passed up as an argument, or
  a callback over it called from below. The layers are, top down, jobs/commands, jobs/parts, jobs/kit and
  jobs/plane (one layer), curation/, scoring/.

Callees are resolved through imports (module level and inside functions), local definitions, `Class.method`, and
the config's own classes (its dataclass bases); a method called on an object of unknown type is matched by name
among the classes of the modules the caller imports. What is not in jobs/, curation/ or scoring/ (the standard
library, typer) is not followed. `python -m tests.config_walk [--root TREE] [-v]` prints the walk (of another
checkout with --root, e.g. a `git worktree` of an older commit).
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jobs", "curation", "scoring")
LAYERS = (("jobs.commands", 5), ("jobs.parts", 4), ("jobs.kit", 3), ("jobs.plane", 3), ("jobs", 5),
          ("curation", 2), ("scoring", 1))


def layer(module: str) -> int:
    for prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return 0


@lru_cache(maxsize=None)
def module_tree(module: str) -> ast.Module | None:
    path = ROOT.joinpath(*module.split("."))
    for f in (path.with_suffix(".py"), path / "__init__.py"):
        if f.is_file():
            return ast.parse(f.read_text())
    return None


def is_module(name: str) -> bool:
    return name.split(".")[0] in PACKAGES and module_tree(name) is not None


@dataclass(frozen=True)
class Func:
    module: str
    qualname: str  # "f" or "Class.f"

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}"


@lru_cache(maxsize=None)
def definitions(module: str) -> dict[str, ast.AST]:
    """qualname -> FunctionDef (top-level functions and methods) and ClassDef, of one module."""
    tree, out = module_tree(module), {}
    for node in tree.body if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            out[node.name] = node
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{sub.name}"] = sub
    return out


def imported_names(module: str, fn: ast.AST | None) -> dict[str, str]:
    """local name -> "module" or "module:name", from the module's imports and those inside `fn`."""
    names: dict[str, str] = {}
    scopes = [module_tree(module)] + ([fn] if fn is not None else [])
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    names[a.asname or a.name] = full if is_module(full) else f"{node.module}:{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    return names


def class_bases(module: str, cls: str) -> list[tuple[str, str]]:
    """(module, class) of `cls` and its bases in the project, nearest first."""
    node = definitions(module).get(cls)
    if not isinstance(node, ast.ClassDef):
        return []
    out, names = [(module, cls)], imported_names(module, None)
    for base in node.bases:
        if isinstance(base, ast.Name):
            target = names.get(base.id)
            if target and ":" in target:
                out += class_bases(*target.split(":"))
            elif base.id in definitions(module):
                out += class_bases(module, base.id)
    return out


def method_of(classes: list[tuple[str, str]], name: str) -> Func | None:
    for module, cls in classes:
        if f"{cls}.{name}" in definitions(module):
            return Func(module, f"{cls}.{name}")
    return None


def resolve(call: ast.Call, caller: Func, fn: ast.AST, names: dict[str, str]) -> Func | None:
    f = call.func
    if isinstance(f, ast.Name):
        if f.id in definitions(caller.module):
            node = definitions(caller.module)[f.id]
            return Func(caller.module, f"{f.id}.__init__") if isinstance(node, ast.ClassDef) else Func(caller.module,
                                                                                                     f.id)
        target = names.get(f.id)
        if target and ":" in target:
            module, name = target.split(":")
            node = definitions(module).get(name) if is_module(module) else None
            if isinstance(node, ast.ClassDef):
                return method_of(class_bases(module, name), "__init__")
            return Func(module, name) if node is not None else None
        return None
    if isinstance(f, ast.Attribute):
        base = f.value
        if isinstance(base, ast.Name):
            target = names.get(base.id)
            if target and ":" not in target and is_module(target) and f.attr in definitions(target):
                return Func(target, f.attr)
            if target and ":" in target:  # Class.method, imported
                module, cls = target.split(":")
                if is_module(module):
                    return method_of(class_bases(module, cls), f.attr)
            if base.id in definitions(caller.module):  # Class.method, local
                return method_of(class_bases(caller.module, base.id), f.attr)
            if base.id == "self" and "." in caller.qualname:
                return method_of(class_bases(caller.module, caller.qualname.split(".")[0]), f.attr)
        # an object of unknown type: a method of that name among the classes the caller can see
        seen = {t.split(":")[0] for t in names.values() if ":" in t} | {t for t in names.values() if ":" not in t}
        seen.add(caller.module)
        hits = [Func(m, q) for m in sorted(seen) if is_module(m) for q in definitions(m)
                if q.endswith(f".{f.attr}") and q.count(".") == 1]
        return hits[0] if len(hits) == 1 else None
    return None


def params(node: ast.AST) -> list[str]:
    a = node.args
    return [p.arg for p in (*a.posonlyargs, *a.args)]


def landing(call: ast.Call, callee: "Func", target: ast.AST, where: int | str) -> str | None:
    """The callee's parameter that receives the call's argument `where` (a position or a keyword). A method called
    through an instance or its class has its first parameter (self, cls) filled already; `Class.method(obj, ...)`
    on a plain method passes self itself."""
    ps = params(target)
    if isinstance(where, str):
        return where if where in ps or target.args.kwonlyargs else None
    unbound = (ps[:1] == ["self"] and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
               and call.func.value.id in definitions(callee.module))
    k = where + (1 if "." in callee.qualname and ps[:1] in (["self"], ["cls"]) and not unbound else 0)
    return ps[k] if k < len(ps) else None


def carries(expr: ast.AST, tracked: set[str]) -> bool:
    """The expression is the config: its name, or `replace(cfg, ...)` / `dataclasses.replace(cfg, ...)`."""
    if isinstance(expr, ast.Name):
        return expr.id in tracked
    if isinstance(expr, ast.Call) and expr.args and getattr(expr.func, "attr", getattr(expr.func, "id", "")) in (
            "replace",):
        return carries(expr.args[0], tracked)
    return False


@dataclass
class Walk:
    rooms: dict[str, int] = field(default_factory=dict)  # module -> functions entered there
    functions: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    climbs: list[tuple[str, str]] = field(default_factory=list)


def closures(node: ast.AST, tracked: set[str]) -> set[str]:
    """Names of the functions defined inside `node` whose bodies read a tracked name."""
    return {sub.name for sub in ast.walk(node) if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))
            and sub is not node and any(isinstance(n, ast.Name) and n.id in tracked for n in ast.walk(sub))}


def is_callback(expr: ast.AST, tracked: set[str], named: set[str]) -> bool:
    if isinstance(expr, ast.Lambda):
        return any(isinstance(n, ast.Name) and n.id in tracked for n in ast.walk(expr.body))
    return isinstance(expr, ast.Name) and expr.id in named


def follow_callback(out: "Walk", todo: list, func: Func, name: str, home: str) -> None:
    """In `func`, the parameter `name` holds a callback over the config defined in module `home`: a call of it
    reaches the config there; passing it on is followed."""
    node = definitions(func.module).get(func.qualname)
    if node is None:
        return
    names = imported_names(func.module, node)
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Name) and call.func.id == name:
            edge = (str(func), f"{home}:<{name}>")
            if edge not in out.calls:
                out.calls.append(edge)
                if layer(home) > layer(func.module):
                    out.climbs.append(edge)
            continue
        handed = [(i, a) for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name]
        handed += [(kw.arg, kw.value) for kw in call.keywords if isinstance(kw.value, ast.Name) and kw.value.id == name]
        if not handed:
            continue
        callee = resolve(call, func, node, names)
        target = definitions(callee.module).get(callee.qualname) if callee else None
        for where, _ in handed if target is not None else ():
            p = landing(call, callee, target, where)
            if p:
                todo.append(("callback", callee, p, home))


def walk(module: str, function: str, param: str = "cfg", config_classes: tuple[tuple[str, str], ...] = ()) -> Walk:
    """Follow `param` of `module:function` through every call that passes it. `config_classes`: (module, class)
    of the config, whose methods (and its bases') a `cfg.method()` call enters."""
    classes = [c for mc in config_classes for c in class_bases(*mc)]
    out, seen, todo = Walk(), set(), [("config", Func(module, function), param, None)]
    while todo:
        kind, func, name, home = todo.pop()
        if (kind, func, name) in seen:
            continue
        seen.add((kind, func, name))
        if kind == "callback":
            follow_callback(out, todo, func, name, home)
            continue
        node = definitions(func.module).get(func.qualname)
        if node is None:
            continue
        out.functions.append(str(func))
        out.rooms[func.module] = out.rooms.get(func.module, 0) + 1
        names = imported_names(func.module, node)
        tracked = {name}
        for sub in ast.walk(node):  # names bound to the config: `c = cfg`
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name) \
                    and carries(sub.value, tracked):
                tracked.add(sub.targets[0].id)
        named = closures(node, tracked)
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            handed = [(i, a) for i, a in enumerate(call.args) if is_callback(a, tracked, named)]
            handed += [(kw.arg, kw.value) for kw in call.keywords if kw.arg and is_callback(kw.value, tracked, named)]
            if handed:
                callee = resolve(call, func, node, names)
                target = definitions(callee.module).get(callee.qualname) if callee else None
                for where, _ in handed if target is not None else ():
                    p = landing(call, callee, target, where)
                    if p:
                        todo.append(("callback", callee, p, func.module))
            passed: list[int | str] = [i for i, arg in enumerate(call.args) if carries(arg, tracked)]
            passed += [kw.arg for kw in call.keywords if kw.arg and carries(kw.value, tracked)]
            on_self = (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                       and call.func.value.id in tracked)
            if not passed and not on_self:
                continue
            callee = method_of(classes, call.func.attr) if on_self else resolve(call, func, node, names)
            if callee is None:
                continue
            target = definitions(callee.module).get(callee.qualname)
            if target is None:
                continue
            landed = ["self"] if on_self else []
            landed += [p for p in (landing(call, callee, target, where) for where in passed) if p]
            for p in landed:
                edge = (str(func), str(callee))
                if edge not in out.calls:
                    out.calls.append(edge)
                    if layer(callee.module) > layer(func.module):
                        out.climbs.append(edge)
                todo.append(("config", callee, p, None))
    return out


EVALUATE = ("jobs.commands.evaluate", "run_evaluate", "cfg", (("jobs.commands.evaluate", "EvaluateConfig"),))


def main(argv: list[str]) -> int:
    global ROOT
    if "--root" in argv:
        ROOT = Path(argv[argv.index("--root") + 1]).resolve()
    w = walk(*EVALUATE)
    print(f"evaluate's config: {len(w.rooms)} rooms, {len(w.functions)} functions, {len(w.calls)} calls, "
          f"{len(w.climbs)} climbs")
    for m, n in sorted(w.rooms.items(), key=lambda kv: (-layer(kv[0]), kv[0])):
        print(f"  room {m} ({n} function(s))")
    for a, b in w.climbs:
        print(f"  climb {a} -> {b}")
    if "-v" in argv:
        for a, b in w.calls:
            print(f"  call {a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
