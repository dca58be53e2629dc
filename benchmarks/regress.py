"""``python -m benchmarks regress``: every class of problem against a stored baseline.

Run it before merging a change to a planner: it fails (exit 1) when any row
got worse than the baseline (``benchmarks/baseline.json``) says it was.

    python -m benchmarks regress                      # every class, a few minutes
    python -m benchmarks regress --class tilings,onnx-light
    python -m benchmarks regress --write-baseline     # after a change that is wanted
    python -m benchmarks regress --write-baseline --only-new   # rows without a baseline

Steps, for each row (a problem of a class, with that class's planner settings):

- measure the **peer** on the row's problem just before the row:
  omnimalloc's greedy-by-size (fixed code, fixed work) repeated until it has
  taken `PEER_SECONDS`; its fastest run is the machine's speed at that
  moment (the fastest: a burst of load slows some runs, not all);
- plan the row (`memplan.registry.plan_with`), check the plan with the
  validator; keep its arena, status, seconds and ``seconds / peer``;
- compare with the baseline row: the row **fails** when its plan is invalid,
  its arena grew, or its time ratio grew by more than ``--tolerance`` (25 %)
  when it took at least `TIME_FLOOR` seconds (shorter runs are noise) and it
  or its baseline *settled* (proved optimal or infeasible, or fitted the
  capacity: a run that was not settled took its time limit);
- a failing row is run again, up to ``--retries`` times, and fails only if
  every attempt fails: a loaded machine slows one run, rarely three.

Rows without a baseline pass as ``new``; ``--write-baseline --only-new``
measures and stores only those. Cost: the classes' time limits
(`CLASSES`) plus the peers; every row runs in this process, one at a time.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from benchmarks import report
from benchmarks.suites import REPO, cases, onnx_light_dir

BASELINE = REPO / "benchmarks" / "baseline.json"
TOLERANCE = 0.25  # a time ratio may grow by this share before the row fails
TIME_FLOOR = 1.0  # seconds: shorter rows are not judged by their time
PEER_SECONDS = 0.2  # the peer runs again until it has taken this long
PEER_RUNS = 3  # ... and at least this many times
TFLITE_MODELS = ("ds_cnn", "resnet8", "autoencoder")  # int8, built by benchmarks.tflite_models
TRACE_SIZES = (18_000, 60_000)  # training traces beyond the 10k of every large kind


@dataclass(frozen=True)
class Row:
    """One problem and how it is planned."""

    key: str  # "class/name", the baseline's key
    build: Callable  # -> Problem
    options: dict = field(default_factory=dict)  # the exact planner's options


def _minimalloc(minimise: bool) -> list[Row]:
    from benchmarks.peers import reversed_problem

    klass = "minimalloc-minimise" if minimise else "minimalloc-fit"
    options = {"time_limit": 2.0, "deterministic": True} if minimise else {"time_limit": 60.0}
    rows = []
    for case in cases("minimalloc"):
        build = partial(case.problem, "minimise" if minimise else "fit")
        rows.append(Row(f"{klass}/{case.name}", build, options))
        rows.append(Row(f"{klass}/{case.name}-reversed", _then(build, reversed_problem),
                        options))
    return rows


def _then(build: Callable, change: Callable) -> Callable:
    return lambda: change(build())


def tiling(kind: str, n: int, seed: int | None = None):
    """omnimalloc's pinwheel (non-guillotine) or tiling (guillotine) source: ``n``
    buffers that tile time x capacity exactly; capacity = the lower bound.
    ``seed``: omnimalloc's default unless given (then the name says it)."""
    from omnimalloc.benchmark.sources.pinwheel import PinwheelSource
    from omnimalloc.benchmark.sources.tiling import TilingSource

    from memplan.problem import Problem

    seeded = {} if seed is None else {"seed": seed}
    source = (PinwheelSource if kind == "pinwheel" else TilingSource)(num_allocations=n,
                                                                       **seeded)
    made = source.get_allocations()
    return Problem.from_arrays([a.size for a in made], [a.start for a in made],
                               [a.end for a in made], capacity=source.memory_capacity,
                               name=f"{kind}-{n}" + ("" if seed is None else f"-s{seed}"))


def _tilings() -> list[Row]:
    return [Row(f"tilings/{kind}-{n}", partial(tiling, kind, n), {"time_limit": 30.0})
            for kind, n in (("pinwheel", 101), ("tiling", 100), ("pinwheel", 501),
                            ("tiling", 500), ("pinwheel", 1001), ("tiling", 1000))]


def _large() -> list[Row]:
    from benchmarks.generate import network_like
    from benchmarks.large import training_step, transformer_decoder
    from benchmarks.traces import inference_trace, training_step_trace

    makers = {"decoder": transformer_decoder, "training": training_step,
              "network": network_like, "training-trace": training_step_trace,
              "inference-trace": inference_trace}
    sizes = [(kind, make, 10_000) for kind, make in makers.items()] + \
        [("training-trace", training_step_trace, n) for n in TRACE_SIZES]
    return [Row(f"large/{kind}-{n // 1000}k", partial(make, n, 0),
                {"time_limit": 5.0, "deterministic": True}) for kind, make, n in sizes]


def _onnx_light() -> list[Row]:
    return [Row(f"onnx-light/{case.name}", partial(case.problem, "minimise"),
                {"time_limit": 10.0}) for case in cases("onnx-light")] \
        if onnx_light_dir().exists() else []


def _tflite() -> list[Row]:
    from benchmarks.tflite_models import model_file
    from memplan.tflite.tflite import from_tflite

    out = REPO / "build" / "tflite_models"
    return [Row(f"tflite/{name}", _then(partial(model_file, out, name, "int8"), from_tflite),
                {"time_limit": 10.0}) for name in TFLITE_MODELS]


CLASSES: dict[str, Callable[[], list[Row]]] = {
    "minimalloc-fit": partial(_minimalloc, False),
    "minimalloc-minimise": partial(_minimalloc, True),
    "tilings": _tilings, "large": _large, "onnx-light": _onnx_light, "tflite": _tflite,
}


def rows(classes: tuple[str, ...], only: tuple[str, ...] = ()) -> list[Row]:
    """The rows of ``classes`` (all when empty), only those whose key names one of ``only``."""
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        raise KeyError(f"unknown class {unknown[0]!r}; valid classes: {', '.join(CLASSES)}")
    chosen = [row for name in (classes or tuple(CLASSES)) for row in CLASSES[name]()]
    return [row for row in chosen if not only or row.key.split("/", 1)[1] in only]


def peer_seconds(problem) -> float | None:
    """Fastest seconds of omnimalloc's greedy-by-size on ``problem`` (None without omnimalloc)."""
    try:
        from omnimalloc.allocators import GreedyBySizeAllocator
        from omnimalloc.primitives import Allocation
    except ImportError:
        return None
    allocations = tuple(Allocation(id=b, size=int(size), start=int(start), end=int(end))
                        for b, (size, start, end) in enumerate(zip(
                            problem.sizes.tolist(), problem.starts.tolist(),
                            problem.ends.tolist(), strict=True)))
    runs, began = [], time.perf_counter()
    while len(runs) < PEER_RUNS or time.perf_counter() - began < PEER_SECONDS:
        start = time.perf_counter()
        GreedyBySizeAllocator().allocate(allocations)
        runs.append(time.perf_counter() - start)
    return min(runs)


def measure(row: Row) -> dict:
    """Plan one row once: arena, status, validity, seconds, and the peer's seconds."""
    from memplan.registry import plan_with
    from memplan.validate import validate

    problem = row.build()
    peer = peer_seconds(problem)
    began = time.perf_counter()
    plan = plan_with("exact", problem, **row.options)
    seconds = time.perf_counter() - began
    broken = [v for v in validate(problem, plan) if v.kind != "capacity" or
              plan.status in ("optimal", "feasible")]
    settled = plan.status in ("optimal", "infeasible") or (
        plan.status == "feasible" and problem.capacity is not None)
    return {"arena": int(plan.arena_size), "status": plan.status, "settled": settled,
            "seconds": round(seconds, 6),
            "peer_seconds": None if peer is None else round(peer, 9),
            "ratio": None if peer is None else round(seconds / peer, 2),
            "invalid": str(broken[0]) if broken else None}


def judge(now: dict, then: dict | None, tolerance: float = TOLERANCE) -> list[str]:
    """Why the row ``now`` is worse than ``then`` (its baseline); empty when it is not."""
    why = [f"invalid plan: {now['invalid']}"] if now["invalid"] else []
    if then is None:
        return why
    if now["arena"] > then["arena"]:
        why.append(f"arena {then['arena']} -> {now['arena']}")
    timed = now["ratio"] is not None and then.get("ratio") is not None and \
        (now["settled"] or then["settled"])
    if timed and now["seconds"] >= TIME_FLOOR and \
            now["ratio"] > then["ratio"] * (1 + tolerance):
        why.append(f"time ratio to the peer {then['ratio']:g} -> {now['ratio']:g} "
                   f"({now['seconds']:.2f} s, baseline {then['seconds']:.2f} s)")
    return why


def run(chosen: list[Row], baseline: dict, *, retries: int, tolerance: float,
        progress=print) -> tuple[dict, dict]:
    """Every row, each failing one again up to ``retries`` times: (results, failures)."""
    results, failures = {}, {}
    for row in chosen:
        then = baseline.get(row.key)
        for attempt in range(retries + 1):
            now = measure(row)
            why = judge(now, then, tolerance)
            if not why:
                break
            progress(f"   {row.key}: attempt {attempt + 1}: {'; '.join(why)}")
        results[row.key] = now
        if why:
            failures[row.key] = why
        verdict = "FAIL" if why else "new" if then is None else "ok"
        ratio = "-" if now["ratio"] is None else f"{now['ratio']:g}"
        progress(f"{verdict:4} {row.key}: arena {now['arena']} ({now['status']}), "
                 f"{now['seconds']:.2f} s, ratio {ratio}"
                 + ("" if then is None else f" (baseline {then['arena']}, {then['ratio']})"))
    return results, failures


def main(args) -> int:
    path = Path(args.baseline)
    stored = json.loads(path.read_text()) if path.exists() else {"rows": {}}
    try:
        chosen = rows(args.klass, args.problem)
    except KeyError as error:
        sys.exit(f"error: {error.args[0]}")
    if args.only_new:
        chosen = [row for row in chosen if row.key not in stored["rows"]]
    info = report.machine()
    print(f"# {len(chosen)} rows; load average {info['load average (1, 5, 15 min)']}; "
          f"baseline {path} ({stored.get('machine', {}).get('memplan commit', '?')})",
          file=sys.stderr)
    results, failures = run(chosen, {} if args.write_baseline else stored["rows"],
                            retries=0 if args.write_baseline else args.retries,
                            tolerance=args.tolerance,
                            progress=lambda line: print(line, file=sys.stderr))
    if args.write_baseline:
        stored["rows"] = {**stored["rows"], **results}
        if args.only_new or args.klass or args.problem:  # the other rows keep theirs
            stored.setdefault("added", []).append({**info, "rows": sorted(results)})
        else:
            stored["machine"] = info
        stored["peer"] = "omnimalloc GreedyBySizeAllocator, fastest of the runs in " \
                         f"{PEER_SECONDS:g} s"
        path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(results)} rows to {path}")
        return 0 if not any(r["invalid"] for r in results.values()) else 1
    ratios = [now["ratio"] / stored["rows"][key]["ratio"] for key, now in results.items()
              if now["ratio"] and stored["rows"].get(key, {}).get("ratio")]
    geomean = statistics.geometric_mean(ratios) if ratios else None
    print(f"{len(results) - len(failures)} of {len(results)} rows pass; time ratio against "
          f"the baseline, geometric mean: {'-' if geomean is None else f'{geomean:.2f}'}; "
          f"load average {report.machine()['load average (1, 5, 15 min)']}")
    for key, why in failures.items():
        print(f"FAIL {key}: {'; '.join(why)}")
    return 1 if failures else 0
