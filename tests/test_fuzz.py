"""Fuzzing: random problems through every planner, random files through every command.

What it holds memplan to:

- every plan of every registered planner (and of the deployment pipeline
  for regions and variable scratch) passes `memplan.validate` *and* the
  brute-force pairwise checker below, written from the problem's definition
  without any memplan code;
- no planner calls a plan ``optimal`` (or proves a bound) above a valid plan
  another planner found;
- a problem memplan refuses raises `ProblemError` with a one-line message;
- every command on every random file (CSV, JSON problem, JSON plan, ONNX:
  truncated or random bytes) exits 0, 1 or 2, and a 2 comes with exactly one
  line on stderr; nothing escapes as a traceback;
- seeded mutations of real files of every format go through every reader
  in a worker process (`benchmarks.fuzz`): a problem or one line with exit
  2, no traceback or crash, memory and time bounded, and what ``solve -o``
  writes accepted by the format's own loader.

Problems mix aliases (mandatory and optional), pins, alignment, explicit
conflicts, capacities, regions and variable-size scratch, with sizes up to
the largest memplan accepts (`memplan.limits.MAX_BYTES`).

CI runs a short profile (25 examples a test); ``MEMPLAN_FUZZ=long`` soaks
(2500 a test, or ``MEMPLAN_FUZZ_EXAMPLES``). ``MEMPLAN_FUZZ_COUNTS=path.json``
adds up what was tried (problems, plans checked, commands run) in that file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memplan import Alias, Buffer, NoPlanError, Problem, ProblemError, Region, api, plan_with
from memplan import planners as registered
from memplan.cli import main
from memplan.limits import MAX_BYTES
from memplan.validate import validate

LONG = os.environ.get("MEMPLAN_FUZZ", "") == "long"
settings.register_profile("fuzz-ci", max_examples=25, deadline=None, derandomize=False,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.filter_too_much])
settings.register_profile("fuzz-long", deadline=None,
                          max_examples=int(os.environ.get("MEMPLAN_FUZZ_EXAMPLES", "2500")),
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.filter_too_much])
FUZZ = settings.get_profile("fuzz-long" if LONG else "fuzz-ci")
COUNTS: Counter = Counter()
EXACT_SECONDS = 1.0


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    target = os.environ.get("MEMPLAN_FUZZ_COUNTS")
    if target:
        path = Path(target)
        old = json.loads(path.read_text()) if path.is_file() else {}
        for key, value in COUNTS.items():
            old[key] = old.get(key, 0) + value
        path.write_text(json.dumps(old, indent=1, sort_keys=True))


# ------------------------------------------------------------ the brute-force checker
def brute_force_violations(problem: Problem, plan) -> list[str]:
    """Every broken promise, by checking every pair: O(n^2), from the definitions only.

    Two buffers may share bytes when honoured mandatory aliases join them (one
    piece of memory), or when one honoured optional alias joins their two
    pieces directly. Explicit conflicts hold whatever the aliases say.
    """
    n = len(problem)
    off = [int(x) for x in plan.offsets]
    sizes = [int(x) for x in (problem.sizes if plan.sizes is None else plan.sizes)]
    region = [0] * n if plan.regions is None else [int(r) for r in plan.regions]
    ids, found = problem.ids, []
    index = {id: i for i, id in enumerate(ids)}
    fits = plan.status in ("optimal", "feasible")
    piece = list(range(n))  # pieces joined by honoured mandatory aliases, by relabelling
    for a in problem.aliases:
        s, d = index[a.src], index[a.dst]
        honoured = off[d] == off[s] + a.delta
        if not a.optional and not honoured:
            found.append(f"alias {a.src}->{a.dst} not honoured")
        if not a.optional and honoured and piece[s] != piece[d]:
            old, new = piece[d], piece[s]
            piece = [new if p == old else p for p in piece]
    links = set()
    for a in problem.aliases:
        s, d = index[a.src], index[a.dst]
        if a.optional and off[d] == off[s] + a.delta:
            links.add(frozenset((piece[s], piece[d])))
    conflicts = {frozenset((ids[a], ids[b])) for a, b in problem.conflicts.tolist()}
    for i in range(n):
        b = problem.buffer(i)
        if off[i] < 0:
            found.append(f"{b.id} below 0")
        if off[i] % b.alignment:
            found.append(f"{b.id} misaligned")
        if b.offset is not None and off[i] != b.offset:
            found.append(f"{b.id} moved from its pin")
        if not b.size <= sizes[i] <= int(problem.max_sizes[i]):
            found.append(f"{b.id} granted {sizes[i]}")
        if fits and problem.capacity is not None and off[i] + sizes[i] > problem.capacity:
            found.append(f"{b.id} above the capacity")
        if problem.regions:
            name = problem.regions[region[i]].name
            if b.regions is not None and name not in b.regions:
                found.append(f"{b.id} in region {name}")
            cap = problem.regions[region[i]].capacity
            if fits and cap is not None and off[i] + sizes[i] > cap:
                found.append(f"{b.id} above region {name}'s capacity")
    for i in range(n):
        for j in range(i + 1, n):
            if region[i] != region[j]:
                continue
            share = off[i] < off[j] + sizes[j] and off[j] < off[i] + sizes[i]
            if not share:
                continue
            if frozenset((ids[i], ids[j])) in conflicts:
                found.append(f"conflict {ids[i]} {ids[j]}")
            live = problem.starts[i] < problem.ends[j] and problem.starts[j] < problem.ends[i]
            allowed = piece[i] == piece[j] or frozenset((piece[i], piece[j])) in links
            if live and not allowed:
                found.append(f"overlap {ids[i]} {ids[j]}")
    tops = [o + s for o, s in zip(off, sizes, strict=True)]
    if not problem.regions and n and plan.arena_size != max(tops):
        found.append("arena size")
    return found


def check_plans(problem: Problem, plans: dict[str, object]) -> None:
    """Every plan valid twice over; no optimal claim or proven bound above a found plan."""
    usable = {}
    for name, plan in plans.items():
        COUNTS["plans checked"] += 1
        violations = [v for v in validate(problem, plan)
                      if not (v.kind == "capacity" and plan.status in ("infeasible", "unknown"))]
        assert violations == [], (name, violations, problem_repr(problem))
        brute = brute_force_violations(problem, plan)
        assert brute == [], (name, brute, problem_repr(problem))
        if plan.status in ("optimal", "feasible") and not problem.regions:
            usable[name] = plan.arena_size
    if not usable:
        return
    smallest = min(usable.values())
    for name, plan in plans.items():
        if problem.regions:
            continue
        assert plan.best_bound <= smallest, (name, plan.best_bound, usable, problem_repr(problem))
        if plan.status == "optimal":
            assert plan.arena_size <= smallest, (name, plan.arena_size, usable,
                                                 problem_repr(problem))


def problem_repr(problem: Problem) -> str:
    from memplan.formats.memplan_json import problem_to_dict

    return json.dumps(problem_to_dict(problem))


# ------------------------------------------------------------ random problems
SMALL = st.integers(1, 64)
HUGE = st.integers(1, MAX_BYTES // 4)


@st.composite
def problems(draw, huge: bool = False):
    n = draw(st.integers(1, 7))
    buffers = []
    for i in range(n):
        size = draw(HUGE if huge and draw(st.booleans()) else SMALL)
        start = draw(st.integers(0, 6))
        end = start + draw(st.integers(1, 4))
        alignment = draw(st.sampled_from([1, 1, 2, 4, 8]))
        offset = None
        if draw(st.integers(0, 5)) == 0:
            offset = alignment * draw(st.integers(0, 8))
        max_size = None
        if draw(st.integers(0, 6)) == 0:
            max_size = size + draw(st.integers(0, 32))
        buffers.append(Buffer(f"b{i}", size, start, end, alignment, offset,
                              kind="scratch" if max_size else "activation", max_size=max_size))
    ids = [b.id for b in buffers]
    aliases = []
    if n >= 2:
        for _ in range(draw(st.integers(0, 3))):
            src, dst = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
            aliases.append(Alias(src, dst, draw(st.sampled_from([0, 0, 4, 8, -8])),
                                 draw(st.booleans())))
    conflicts = []
    if n >= 2:
        for _ in range(draw(st.integers(0, 3))):
            conflicts.append((draw(st.sampled_from(ids)), draw(st.sampled_from(ids))))
    capacity = draw(st.one_of(st.none(), st.integers(1, 400)))
    regions = ()
    if draw(st.integers(0, 5)) == 0:
        regions = (Region("sram", draw(st.one_of(st.none(), st.integers(8, 200)))),
                   Region("dram", None, 1.0))
        buffers = [b if draw(st.booleans()) else
                   Buffer(b.id, b.size, b.start, b.end, b.alignment, b.offset,
                          tuple(draw(st.sampled_from([["sram"], ["dram"], ["sram", "dram"]]))),
                          b.kind, b.max_size)
                   for b in buffers]
    return buffers, aliases, conflicts, capacity, regions


def build(spec) -> Problem | None:
    """The problem, or None when memplan refuses it (with a one-line reason)."""
    buffers, aliases, conflicts, capacity, regions = spec
    COUNTS["problems tried"] += 1
    try:
        problem = Problem(buffers, aliases=aliases, conflicts=conflicts, capacity=capacity,
                          regions=regions, name="fuzz")
    except ProblemError as error:
        COUNTS["problems refused"] += 1
        assert "\n" not in str(error) and str(error)
        return None
    COUNTS["problems accepted"] += 1
    return problem


def memplan_planners() -> list[str]:
    """The planners memplan registers (not the test doubles other tests may add)."""
    return [name for name, fn in registered().items() if fn.__module__.startswith("memplan.")]


def run_planners(problem: Problem, names) -> dict[str, object]:
    plans = {}
    for name in names:
        try:
            plans[name] = plan_with(name, problem, time_limit=EXACT_SECONDS, seed=1)
        except (ProblemError, NoPlanError) as error:  # e.g. buffers barred from region 0
            COUNTS["planner refusals"] += 1
            assert "\n" not in str(error), (name, str(error))
    return plans


def plan_with_every_planner(spec) -> None:
    problem = build(spec)
    if problem is None:
        return
    check_plans(problem, run_planners(problem, memplan_planners()))


@FUZZ
@given(problems())
def test_every_planner_on_random_problems(spec):
    plan_with_every_planner(spec)


@FUZZ
@given(problems(huge=True))
def test_every_planner_on_problems_with_the_largest_sizes(spec):
    plan_with_every_planner(spec)


@FUZZ
@given(problems())
def test_the_pipeline_with_regions_and_scratch(spec):
    problem = build(spec)
    if problem is None:
        return
    try:
        report = api.solve_report(problem, time_limit=EXACT_SECONDS, heuristic_time_limit=0.1)
    except (ProblemError, NoPlanError) as error:
        COUNTS["planner refusals"] += 1
        assert "\n" not in str(error)
        return
    plans = {"pipeline": report.plan, "heuristic": report.heuristic}
    if report.exact is not None:
        plans["exact"] = report.exact
    check_plans(problem, plans)


# ------------------------------------------------------------ random files
def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def check_exit(argv, code: int, err: str) -> None:
    COUNTS["commands run"] += 1
    COUNTS[f"exit {code}"] += 1
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("memplan "), (argv, err)


COMMANDS = [("info",), ("solve", "--time-limit", "1", "--heuristic-time-limit", "0.1"),
            ("compare", "--planners", "naive,greedy_by_size,best_fit", "--time-limit", "1"),
            ("convert", "-o", "{dir}/out.json"), ("convert", "-o", "{dir}/out.csv")]


def run_every_command(path: Path, plan: Path | None = None) -> None:
    for command in COMMANDS:
        argv = [command[0], str(path), *(p.format(dir=path.parent) for p in command[1:])]
        code, _, err = run_cli(*argv)
        check_exit(argv, code, err)
    if plan is not None:
        argv = ["validate", str(path), str(plan)]
        code, _, err = run_cli(*argv)
        check_exit(argv, code, err)


CELL = st.one_of(st.integers(-5, 70).map(str), st.sampled_from(
    ["", "x", "8.9", "-0", "1e3", "nan", "10" * 20, " 4", '"', "\ufeff", "\x00", "∞"]))


@st.composite
def csv_texts(draw):
    header = draw(st.one_of(
        st.just(["id", "lower", "upper", "size"]),
        st.just(["id", "lower", "upper", "size", "offset"]),
        st.lists(st.sampled_from(["id", "lower", "upper", "size", "end", "alignment",
                                  "offset", "junk"]), min_size=0, max_size=6)))
    rows = draw(st.lists(st.lists(CELL, min_size=max(len(header) - 1, 0), max_size=len(header) + 1),
                         max_size=6))
    bom = "\ufeff" if draw(st.booleans()) else ""
    return bom + "\n".join(",".join(r) for r in [header, *rows]) + "\n"


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10 ** 20), st.floats(allow_nan=True),
              st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)
NUMBER = st.one_of(st.integers(-2, 40), st.just(10 ** 30), st.just(2 ** 62), st.floats(0, 9),
                   st.none(), st.text(max_size=2), st.booleans())


@st.composite
def json_problems(draw):
    """Mostly well-formed memplan problems with a few fields broken."""
    n = draw(st.integers(0, 4))
    buffers = [{"id": draw(st.sampled_from(["a", "b", "c", "d", 1])),
                "size": draw(NUMBER), "start": draw(NUMBER), "end": draw(NUMBER)}
               for _ in range(n)]
    for b in buffers:
        if draw(st.booleans()):
            b[draw(st.sampled_from(["alignment", "offset", "max_size", "regions", "kind"]))] = \
                draw(st.one_of(NUMBER, JSON_VALUES))
    document = {"format": "memplan-problem", "version": draw(st.sampled_from([1, 1, 2, None])),
                "buffers": buffers}
    for key in draw(st.sets(st.sampled_from(["aliases", "conflicts", "regions", "capacity",
                                             "widths", "name"]))):
        document[key] = draw(JSON_VALUES)
    return document


@FUZZ
@given(text=csv_texts())
def test_every_command_on_random_csv(text):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.64.csv"
        path.write_text(text, encoding="utf-8")
        COUNTS["files tried"] += 1
        run_every_command(path, plan=path)


@FUZZ
@given(document=st.one_of(json_problems(), JSON_VALUES), plan=JSON_VALUES,
       offsets=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), NUMBER, max_size=4))
def test_every_command_on_random_json(document, plan, offsets):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.json"
        path.write_text(json.dumps(document))
        plan_path = Path(folder) / "plan.json"
        plan_document = {"format": "memplan-plan", "version": 1, "planner": "x",
                         "status": "feasible", "arena_size": 0, "lower_bound": 0,
                         "best_bound": 0, "offsets": offsets}
        plan_path.write_text(json.dumps(plan if isinstance(plan, dict) and plan
                                        else plan_document))
        COUNTS["files tried"] += 1
        run_every_command(path, plan=plan_path)


def small_onnx() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 8], [1.0] * 8)
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Reshape", ["b", "s"], ["c"]), helper.make_node("Sigmoid", ["c"],
                                                                             ["y"])]
    s = helper.make_tensor("s", TensorProto.INT64, [2], [1, 8])
    graph = helper.make_graph(nodes, "g", [x], [y], [w, s])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


ONNX = small_onnx()


@FUZZ
@given(cut=st.integers(0, len(ONNX)), noise=st.binary(max_size=64),
       flips=st.lists(st.tuples(st.integers(0, len(ONNX) - 1), st.integers(0, 255)),
                      max_size=4))
def test_every_command_on_broken_onnx(cut, noise, flips):
    data = bytearray(ONNX[:cut] + noise)
    for at, value in flips:
        if at < len(data):
            data[at] = value
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "broken.onnx"
        path.write_bytes(bytes(data))
        COUNTS["files tried"] += 1
        run_every_command(path)
        argv = ["solve", str(path), "-o", str(Path(folder) / "out.onnx"), "--time-limit", "1"]
        code, _, err = run_cli(*argv)
        check_exit(argv, code, err)


def test_the_brute_force_checker_catches_what_it_should():
    """The second checker is no rubber stamp: planted faults, each caught."""
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3, alignment=8),
                       Buffer("c", 8, 2, 4), Buffer("d", 8, 1, 2)],
                      aliases=[Alias("a", "c", optional=True), Alias("a", "d")],
                      conflicts=[("b", "c")], capacity=32)
    good = plan_with("greedy_by_size", problem)
    assert brute_force_violations(problem, good) == []

    def planted(**moves):
        offsets = good.offsets.copy()
        for id, value in moves.items():
            offsets[problem.index(id)] = value
        plan = type(good).from_offsets(problem, offsets, planner="planted")
        plan.status = "feasible"
        return brute_force_violations(problem, plan)

    b = good.offset_of(problem, "b")
    assert any("overlap a b" in v for v in planted(a=0, d=0, b=0))
    assert any("misaligned" in v for v in planted(b=b + 1))
    assert any("not honoured" in v for v in planted(d=good.offset_of(problem, "a") + 1))
    assert any("conflict" in v for v in planted(c=b))
    assert any("capacity" in v for v in planted(c=40))
    assert np.all(good.offsets >= 0)


# ------------------------------------------------------------ seeded mutations of every reader
MUTANTS = {"onnx": 40, "pte": 20, "tvmscript": 20, "tflite": 30, "csv": 60, "json": 60}
MUTATION_SEED = 7  # fixed: the same mutants every run (`benchmarks.fuzz.mutate`)


@pytest.fixture(scope="module")
def fuzz_workers():
    from benchmarks.fuzz import Worker

    worker, loader = Worker(), Worker()
    yield worker, loader
    worker.close()
    loader.close()


def _seed_files(reader: str, folder: Path) -> list[Path]:
    """The real files `benchmarks.fuzz` mutates; TFLite's built by the tests' own builder
    (converting a Keras model imports TensorFlow: the longer runs do)."""
    from benchmarks.fuzz_seeds import build_seeds

    if reader != "tflite":
        return build_seeds(reader, folder)
    from .test_tflite import chain

    (folder / "chain.tflite").write_bytes(chain())
    return [folder / "chain.tflite"]


@pytest.mark.parametrize("reader", sorted(MUTANTS))
def test_seeded_mutations_of_every_reader(reader, fuzz_workers, tmp_path):
    """Each mutant read: a problem, or one line and exit 2; no traceback, no crash, within
    the memory bound and the time limit; what solve -o writes passes its format's loader
    (`benchmarks.fuzz`, whose ``python -m benchmarks fuzz`` runs longer)."""
    from benchmarks.fuzz import fuzz_reader

    worker, loader = fuzz_workers
    seeds = _seed_files(reader, tmp_path)
    tally = fuzz_reader(reader, seeds, seed=MUTATION_SEED, inputs=MUTANTS[reader],
                        worker=worker, loader=loader)
    COUNTS[f"{reader} mutants"] += tally.counts["tried"]
    assert tally.failures == [], "\n".join(tally.failures)
    assert tally.counts["tried"] == MUTANTS[reader]
    assert tally.counts["refused"] > 0  # the mutants reached the reader's refusals


def test_the_mutations_are_seeded_and_the_checks_catch_what_they_should(fuzz_workers,
                                                                        tmp_path):
    """The same mutant for the same seed; a traceback, a second error line, a damaged
    output and a hang are each counted (the checks are no rubber stamp)."""
    from benchmarks import fuzz
    from benchmarks.fuzz_mutations import Mutant, mutate

    seed = tmp_path / "a.csv"
    seed.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    first, again = mutate([seed], "csv", 3, 5), mutate([seed], "csv", 3, 5)
    assert first == again and first.changes
    assert mutate([seed], "csv", 4, 5) != first or mutate([seed], "csv", 3, 6) != first
    worker, loader = fuzz_workers
    tally, mutant = fuzz.Tally("csv"), Mutant(b"", "a.csv", ["none"])
    answers = [({"code": None, "err": "", "escaped": "KeyError: 'x'", "growth": 0}, "tracebacks"),
               ({"code": 2, "err": "memplan convert: error: a\nb\n", "escaped": None,
                 "growth": 0}, "bad messages"),
               ({"code": 2, "err": "memplan convert: error: \x1b[2J\n", "escaped": None,
                 "growth": 0}, "bad messages"),
               ({"code": 0, "err": "", "escaped": None, "growth": 2 ** 40}, "over memory"),
               ({"hang": 61.0}, "hangs"), ({"crash": "exit -11"}, "crashes")]
    for answer, kind in answers:
        before = tally.counts[kind]
        fuzz._held(tally, mutant, answer, ["convert"], 100)
        assert tally.counts[kind] == before + 1, (kind, tally.counts)
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": "memplan-problem", "version": 1, "buffers": [{"id": "a"}]}')
    assert loader.ask({"load": str(damaged)})["accepts"] is False
    assert worker.ask({"argv": ["info", str(seed)]}, timeout=60)["code"] == 0
    assert "hang" in worker.ask({"argv": ["solve", str(seed)]}, timeout=0)
