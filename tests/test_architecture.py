"""The package's layers: no import cycle, no arrow back up, every module name unique.

Layers, lowest first (a module imports only lower layers, or its own layer
where no cycle forms; the units of layer 2 or 3 never import each other).
`LAYERS` names a top-level module or folder (a unit), or one module of a
folder: a compiler's folder (onnx/, tflite/, executorch/, tvm/) and formats/
sit at the top but for their readers (layer 2) and writers (layer 3), named
one by one; the longest name that matches a module places it:

    0  errors, limits, problem, output_files, stopping,  the vocabulary, files, Ctrl-C,
       startup, shares, budget                         and time
    1  bounds, plan, groups, validate, options, registry          what every planner needs
    2  heuristics/, solver/, and every format's readers           planners and readers
    3  deploy/, schedule/, and the writers                        on top of any planner
    4  everything else: api, viz, the proofs and passes, ...      the library's entry points
    5  cli/                                                       the command: nothing imports it

docs/explanation/architecture.md draws them; a test below keeps its table and
`LAYERS` the same. Every import of a memplan module counts, also those inside
functions.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import memplan

ROOT = Path(memplan.__file__).parent
PAGE = ROOT.parent / "docs" / "explanation" / "architecture.md"
LAYERS = {
    "errors": 0, "limits": 0, "problem": 0, "output_files": 0, "stopping": 0, "shares": 0,
    "budget": 0, "startup": 0,
    "bounds": 1, "plan": 1, "groups": 1, "validate": 1, "options": 1, "registry": 1,
    "heuristics": 2, "solver": 2,
    "formats.memplan_json": 2, "formats.minimalloc_csv": 2, "formats.c_header": 2,
    "onnx.onnx": 2, "onnx.onnx_aliases": 2, "onnx.onnx_batch": 2, "onnx.onnx_graph": 2,
    "onnx.onnx_options": 2, "onnx.onnx_shapes": 2, "onnx.onnx_types": 2,
    "onnx.onnx_vectors": 2, "onnx.onnx_weightless": 2,
    "tflite.tflite": 2,
    "executorch.executorch": 2, "executorch.executorch_chain": 2,
    "executorch.executorch_pte": 2, "executorch.executorch_specs": 2,
    "executorch.pte_flatbuffer": 2, "executorch.pte_verify": 2,
    "tvm.relax": 2, "tvm.relax_script": 2, "tvm.relax_walk": 2,
    "deploy": 3, "schedule": 3,
    "onnx.onnx_metadata": 3, "tflite.tflm": 3, "tflite.tflite_model": 3,
    "executorch.pte_program": 3,
    "cli": 5,
}
TOP = 4
COMPILERS = ("onnx", "tflite", "executorch", "tvm")  # a folder each


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
    """(layer, unit): the layer of the longest `LAYERS` name that is the module or holds it;
    the unit is the folder (or top-level module) the module belongs to."""
    parts = name.split(".")[1:]
    if not parts:
        return TOP, "memplan"
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])], parts[0]
    return TOP, parts[0]


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


def _upward() -> list[str]:
    """Every arrow to a higher layer, or across units of layer 2 or 3."""
    upward = []
    for name, imported in GRAPH.items():
        layer, unit = _place(name)
        for other in imported:
            other_layer, other_unit = _place(other)
            if other_layer > layer or (other_layer == layer and layer in (2, 3)
                                       and other_unit != unit):
                upward.append(f"{name} -> {other}")
    return upward


def test_imports_only_go_down():
    assert _upward() == []


def test_module_names_are_unique():
    """Every module's own name is unique, but a command's module, named after its command
    (``memplan validate`` is `memplan.cli.validate`, beside the library's `memplan.validate`)."""
    from memplan.cli import COMMANDS

    commands = {command.__name__ for command in COMMANDS}
    leaves = Counter(name.rpartition(".")[2] for name, path in MODULES.items()
                     if path.name != "__init__.py" and name not in commands)
    assert [leaf for leaf, count in leaves.items() if count > 1] == []


def test_the_checks_see_a_cycle_and_an_upward_arrow():
    """The checks here are not vacuous: they find a planted cycle, arrows back up (a proof
    that imports the command line, a reader that imports its compiler's writer) and an
    arrow from one compiler's folder to another's."""
    planted = [("memplan.problem", "memplan.plan"),
               ("memplan.tflite.tflm_arena", "memplan.cli.exit_codes"),
               ("memplan.onnx.onnx_graph", "memplan.onnx.onnx_metadata"),
               ("memplan.executorch.executorch_runtime", "memplan.onnx.prove")]
    for name, other in planted:
        GRAPH[name].add(other)
    try:
        assert ["memplan.bounds", "memplan.plan", "memplan.problem"] in _cycles()
        assert {f"{name} -> {other}" for name, other in planted[:3]} <= set(_upward())
        assert _crossing() == ["memplan.executorch.executorch_runtime -> memplan.onnx.prove"]
    finally:
        for name, other in planted:
            GRAPH[name].discard(other)
    assert "memplan.solver.exact" in GRAPH and "memplan.validate" in GRAPH["memplan.solver.exact"]


def test_a_compilers_folder_imports_no_other_compilers():
    """Work on one compiler stays in its folder: what two compilers share is in the core or
    in formats/, never in another compiler's folder."""
    assert _crossing() == []


def _crossing() -> list[str]:
    return [f"{name} -> {other}" for name, imported in GRAPH.items() for other in imported
            if _compiler(name) and _compiler(other) and _compiler(name) != _compiler(other)]


def _compiler(name: str) -> str | None:
    folder = name.split(".")[1] if name.count(".") else None
    return folder if folder in COMPILERS else None


def test_every_module_named_in_the_layers_exists():
    """A module named one by one in `LAYERS` (a folder's reader or writer) is still there."""
    assert [key for key in LAYERS if "." in key and f"memplan.{key}" not in MODULES] == []


def page_layers(text: str) -> dict[str, int]:
    """The layers the architecture page's table gives (its section "The layers": a row per
    layer, the units as code in the second cell, ``onnx/onnx`` for a folder's module)."""
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for number, units in re.findall(r"^\| (\d) \|([^|]*)\|", section, re.MULTILINE):
        for unit in re.findall(r"`([^`]+)`", units):
            layers[unit.rstrip("/").replace("/", ".")] = int(number)
    return layers


def test_the_architecture_page_draws_these_layers():
    """docs/explanation/architecture.md lists the layers checked here: a unit added, moved or
    removed on one side only fails."""
    assert page_layers(PAGE.read_text()) == LAYERS


def test_the_page_check_sees_a_unit_out_of_step():
    text = PAGE.read_text()
    moved = text.replace("| 3 | `deploy/`, ", "| 3 | ")
    moved = moved.replace("| 2 | `heuristics/`, ", "| 2 | `deploy/`, `heuristics/`, ")
    assert page_layers(moved) == {**LAYERS, "deploy": 2} != LAYERS


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


CLOCKS = {"perf_counter", "perf_counter_ns", "process_time", "process_time_ns", "thread_time",
          "thread_time_ns", "monotonic", "monotonic_ns", "time", "time_ns", "clock_gettime",
          "clock_gettime_ns", "pthread_getcpuclockid"}
CLOCK_OWNER = "memplan.budget"  # every clock read that decides (`Budget`, `Stopwatch`)
LOAD_MARK = "memplan.startup"  # one read as memplan begins to load, at module level


def clock_reads(source: str, *, module_level: bool = False) -> list[int]:
    """Lines of ``source`` that name one of the ``time`` module's clocks (a call, a
    reference or an import of it); ``module_level``: only those inside a function."""
    tree = ast.parse(source)
    inside = {id(node) for fn in ast.walk(tree)
              if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
              for node in ast.walk(fn)} if module_level else None
    lines = []
    for node in ast.walk(tree):
        named = (isinstance(node, ast.Attribute) and node.attr in CLOCKS and
                 isinstance(node.value, ast.Name) and node.value.id == "time") or \
            (isinstance(node, ast.ImportFrom) and node.module == "time" and
             any(alias.name in CLOCKS for alias in node.names))
        if named and (inside is None or id(node) in inside):
            lines.append(node.lineno)
    return lines


def test_only_the_budget_reads_a_clock():
    """Time has one owner: outside `memplan.budget` no module reads a clock, to decide or to
    report (a stage asks its `Budget`; a report's seconds come from a `Stopwatch`), but
    `memplan.startup`, which notes when memplan began to load, once, at import."""
    readers = {}
    for name, path in MODULES.items():
        if name == CLOCK_OWNER:
            continue
        lines = clock_reads(path.read_text(), module_level=name == LOAD_MARK)
        if lines:
            readers[name] = lines
    assert readers == {}


def test_the_clock_check_sees_a_read():
    assert clock_reads("import time\nbegan = time.perf_counter()\n") == [2]
    assert clock_reads("from time import thread_time\n") == [1]
    assert clock_reads("def f():\n    return time.monotonic()\n") == [2]
    assert clock_reads("STARTED = time.perf_counter()\n", module_level=True) == []
    assert clock_reads("def f():\n    return time.process_time()\n", module_level=True) == [2]
    assert clock_reads("time.sleep(1)\nwatch.elapsed()\n") == []
