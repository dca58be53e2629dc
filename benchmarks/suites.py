"""The benchmark suites: named lists of problems, each built lazily where it is run.

A `Case` names a problem and knows how to build it, but builds nothing until
asked: the runner lists cases in its own process and the worker subprocess
builds the one it runs, so that a missing frontend (the ONNX one), a missing
data folder or a slow generator only touches the runs that need it.

Suites:
- ``onnx-light``: the nine light models shipped inside the onnx package, read
  by `memplan.onnx.onnx.from_onnx`;
- ``minimalloc``: MiniMalloc's eleven challenging problems, shipped in
  ``benchmarks/data/minimalloc/`` (Apache-2.0; licence and source beside them),
  capacity 1048576 (``fit`` mode) or none (``minimise`` mode);
- ``conflict-graph``: explicit-conflict problems without lifetimes: the
  eight-operator example (`eight_operators`) and seeded random graphs;
- ``scale``: `benchmarks.generate.network_like` at 1k, 10k and 100k buffers;
- ``large``: realistic problems of 1k, 3k, 10k, 30k and 100k buffers from
  seeded generators (`benchmarks.large`): ONNX transformer decoders with KV
  caches read by the ONNX frontend (``decoder-*``), unrolled training steps
  (``training-*``), and `network_like` (``network-*``);
- ``huge``: the same generators at 100k, 300k and 1M buffers, and the traces
  of `benchmarks.traces` tiled 8 and 27 times (``training-60k-x8``: copies end
  to end in time, the independent parts `memplan.parts` plans apart);
- ``tiny``: three small problems for the smoke test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks.generate import conflict_graph, network_like, pinwheel
from benchmarks.large import training_step, transformer_decoder
from benchmarks.traces import TRACES, tiled
from memplan.problem import Problem

REPO = Path(__file__).resolve().parents[1]
MINIMALLOC_DIR = REPO / "benchmarks" / "data" / "minimalloc"
MODES = ("fit", "minimise")
MIB = 1 << 20


@dataclass(frozen=True)
class Case:
    """One problem of a suite; ``build`` makes it (in the worker, not the runner)."""

    suite: str
    name: str
    build: Callable[[], Problem]
    has_capacity: bool = False  # fit and minimise differ only when it does

    def problem(self, mode: str) -> Problem:
        """The problem as run in ``mode``: ``minimise`` drops the capacity."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
        problem = self.build()
        if mode == "minimise" and problem.capacity is not None:
            problem = problem.replace(capacity=None)
        return problem

    def modes(self, wanted: tuple[str, ...]) -> tuple[str, ...]:
        """The modes worth running: a problem without a capacity is only minimised."""
        return wanted if self.has_capacity else ("minimise",)


def onnx_light_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _from_onnx(path: Path) -> Problem:
    from memplan.onnx.onnx import from_onnx  # being written; imported only when run

    return from_onnx(path)


def _onnx_light() -> list[Case]:
    return [Case("onnx-light", path.stem.removeprefix("light_"), partial(_from_onnx, path))
            for path in sorted(onnx_light_dir().glob("light_*.onnx"))]


def _minimalloc() -> list[Case]:
    from memplan.formats.minimalloc_csv import read_problem

    paths = sorted(p for p in MINIMALLOC_DIR.glob("*.csv") if not p.name.startswith("example"))
    return [Case("minimalloc", path.name.split(".")[0], partial(read_problem, path), True)
            for path in paths]


def eight_operators() -> Problem:
    """Eight operators' conflict graph (MiB): no sharing needs 69, a splitting planner 46."""
    sizes = {"1": 5, "2": 10, "3": 8, "4": 20, "5": 2, "6": 6, "7": 15, "8": 3}
    pairs = ["1-2", "2-3", "2-4", "2-5", "3-4", "3-5", "3-6", "4-5", "4-6", "4-7", "5-6",
             "5-7", "5-8", "6-7", "7-8"]
    return Problem.from_conflicts({k: v * MIB for k, v in sizes.items()},
                                  [tuple(p.split("-")) for p in pairs], name="eight-operators")


def _conflict_graph() -> list[Case]:
    graphs = [(12, 0.5), (20, 0.3), (40, 0.2), (80, 0.1)]
    return [Case("conflict-graph", "eight-operators", eight_operators)] + [
        Case("conflict-graph", f"random-{n}-d{d}", partial(conflict_graph, n, d, 0))
        for n, d in graphs]


def _scale() -> list[Case]:
    return [Case("scale", label, partial(network_like, n, 0))
            for label, n in (("1k", 1_000), ("10k", 10_000), ("100k", 100_000))]


LARGE_SIZES = (("1k", 1_000), ("3k", 3_000), ("10k", 10_000), ("30k", 30_000),
               ("100k", 100_000))
LARGE_KINDS = (("decoder", transformer_decoder), ("training", training_step),
               ("network", network_like))


def _large() -> list[Case]:
    return [Case("large", f"{kind}-{label}", partial(make, n, 0))
            for label, n in LARGE_SIZES for kind, make in LARGE_KINDS]


HUGE_SIZES = (("100k", 100_000), ("300k", 300_000), ("1m", 1_000_000))
TILED = (8, 27)  # copies of each trace of `benchmarks.traces.TRACES`, end to end in time


def _tiled(name: str, copies: int) -> Problem:
    return tiled(TRACES[name](), copies)


def _huge() -> list[Case]:
    """The ``large`` generators at 100k-1M buffers, and the traces tiled 8 and 27 times
    (`benchmarks.traces.tiled`: independent parts, the bound one copy's)."""
    return [Case("huge", f"{kind}-{label}", partial(make, n, 0))
            for label, n in HUGE_SIZES for kind, make in LARGE_KINDS] + \
        [Case("huge", f"{name}-x{copies}", partial(_tiled, name, copies))
         for copies in TILED for name in TRACES]


def _tilings() -> list[Case]:
    """Pinwheel tilings (`pinwheel`): every step exactly full, capacity = the lower bound."""
    return [Case("tilings", f"pinwheel-{n}", partial(pinwheel, n, 0), True)
            for n in (101, 501, 1001)]


def fit_five() -> Problem:
    """Five buffers that fit exactly in capacity 12 (the live load peaks at 12)."""
    return Problem.from_arrays([4, 8, 4, 8, 4], [0, 0, 1, 2, 3], [2, 1, 3, 4, 5], capacity=12,
                               name="fit-five")


def _tiny() -> list[Case]:
    return [Case("tiny", "chain-40", partial(network_like, 40, 1)),
            Case("tiny", "conflicts-8", partial(conflict_graph, 8, 0.4, 1)),
            Case("tiny", "fit-five", fit_five, True)]


SUITES: dict[str, Callable[[], list[Case]]] = {
    "onnx-light": _onnx_light, "minimalloc": _minimalloc, "conflict-graph": _conflict_graph,
    "scale": _scale, "large": _large, "tiny": _tiny, "tilings": _tilings, "huge": _huge,
}


def cases(suite: str) -> list[Case]:
    """The cases of ``suite``; raises KeyError listing the valid suites."""
    try:
        make = SUITES[suite]
    except KeyError:
        raise KeyError(f"unknown suite {suite!r}; valid suites: {', '.join(SUITES)}") from None
    return make()


def find_case(suite: str, name: str) -> Case:
    for case in cases(suite):
        if case.name == name:
            return case
    raise KeyError(f"suite {suite!r} has no problem {name!r}")
