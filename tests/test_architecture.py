"""The package's layers: no import cycle, no arrow back up, every module name unique.

Layers, lowest first (a module imports only lower layers, or its own layer
where no cycle forms; the packages of one layer never import each other):

    0  errors, limits, problem, output_files, stopping  the vocabulary, files, Ctrl-C,
       startup, shares, budget                          and time
    1  bounds, plan, groups, validate, options, registry   what every planner needs
    2  heuristics/, solver/, frontends/                 planners and readers, side by side
    3  deploy/, export/                                 deployments on top of any planner
    4  everything else: api, cli, viz, ...              the user's entry points

Every import of a memplan module counts, also those inside functions.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import memplan

ROOT = Path(memplan.__file__).parent
LAYERS = {
    "errors": 0, "limits": 0, "problem": 0, "output_files": 0, "stopping": 0, "shares": 0,
    "budget": 0, "startup": 0,
    "bounds": 1, "plan": 1, "groups": 1, "validate": 1, "options": 1, "registry": 1,
    "heuristics": 2, "solver": 2, "frontends": 2,
    "deploy": 3, "export": 3,
}
TOP = 4


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(["memplan", *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The memplan modules ``name`` imports (a package's name for its ``__init__``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("memplan"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            if not module.startswith("memplan"):
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in MODULES else module)
    found.discard(name)
    return {m for m in found if m in MODULES}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _place(name: str) -> tuple[int, str]:
    """(layer, unit): the unit is the package (or top-level module) the module belongs to."""
    parts = name.split(".")
    if len(parts) == 1:
        return TOP, "memplan"
    return LAYERS.get(parts[1], TOP), parts[1]


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(GRAPH[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycles():
    assert _cycles() == []


def test_imports_only_go_down():
    upward = []
    for name, imported in GRAPH.items():
        layer, unit = _place(name)
        for other in imported:
            other_layer, other_unit = _place(other)
            if other_layer > layer or (other_layer == layer and layer in (2, 3)
                                       and other_unit != unit):
                upward.append(f"{name} -> {other}")
    assert upward == []


def test_module_names_are_unique():
    """Every module's own name is unique, but a command's module, named after its command
    (``memplan validate`` is `memplan.cli.validate`, beside the library's `memplan.validate`)."""
    from memplan.cli import COMMANDS

    commands = {command.__name__ for command in COMMANDS}
    leaves = Counter(name.rpartition(".")[2] for name, path in MODULES.items()
                     if path.name != "__init__.py" and name not in commands)
    assert [leaf for leaf, count in leaves.items() if count > 1] == []


def test_the_checks_see_a_cycle_and_an_upward_arrow():
    """The checks above are not vacuous: they find a planted cycle and arrow."""
    GRAPH["memplan.problem"].add("memplan.plan")
    try:
        assert ["memplan.bounds", "memplan.plan", "memplan.problem"] in _cycles()
        assert _place("memplan.problem") < _place("memplan.plan")
    finally:
        GRAPH["memplan.problem"].discard("memplan.plan")
    assert "memplan.solver.exact" in GRAPH and "memplan.validate" in GRAPH["memplan.solver.exact"]


def test_the_command_line_functions_are_short():
    """A command's module stays small and obvious: no function of ``memplan/cli/`` is longer
    than 60 lines (split it by what it does)."""
    long = []
    for name, path in MODULES.items():
        if name.startswith("memplan.cli"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        node.end_lineno - node.lineno >= 60:
                    long.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1}")
    assert long == []
