"""Heuristics only, side by side: memplan (this checkout and another), omnimalloc's peers.

    python -m benchmarks.heuristic_search --suite minimalloc --variant original,reversed \\
        --time-limit 5 --base /path/to/other/checkout

Every run is a whole process, problem by problem, the peers in turn (so that a
ratio compares runs made at the same moment on a loaded machine):

- ``memplan``: ``memplan solve X.csv --capacity none --no-exact
  --heuristic-time-limit T --csv out.csv --quiet`` from this checkout
  (``--pipeline``: ``--time-limit T``, the heuristics then the exact lanes);
- ``base``: the same command from the checkout given by ``--base`` (its own
  ``PYTHONPATH``), for before/after;
- ``tabu`` and ``supermalloc``: omnimalloc's tabu search and SuperMalloc with
  the same limit (`benchmarks.omnimalloc_peer`).

Suites: ``minimalloc`` (the eleven, minimised, in the variants of
`benchmarks.peers`: ``original``, ``reversed``, ``relabelled``) and ``traces``
(`benchmarks.traces.TRACES`: training steps of 10k to 60k buffers, inference
passes of 30k and 60k). Every solution is read back and checked by
`memplan.validate`; the table gives arena / lower bound per run, seconds
(whole process), peak resident memory, and the geometric mean per peer.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.peers import judge, variant
from benchmarks.suites import REPO, cases
from benchmarks.traces import TRACES
from memplan.bounds import lower_bound
from memplan.formats.minimalloc_csv import write_csv


def problems(suite: str, variants: tuple[str, ...], only: tuple[str, ...]):
    """(name, problem) of the suite, each variant of each problem."""
    if suite == "traces":
        for name, build in TRACES.items():
            if not only or name in only:
                for kind in variants:
                    yield f"{name}/{kind}", variant(build(), kind)
        return
    for case in cases(suite):
        if not only or case.name in only:
            for kind in variants:
                yield f"{case.name}/{kind}", variant(case.problem("minimise"), kind)


def command(peer: str, path: Path, out: Path, limit: float,
            pipeline: bool = False) -> tuple[list[str], Path]:
    """The command line of ``peer`` and the checkout it runs in (``python -m`` imports from
    the working directory first)."""
    if peer in ("tabu", "supermalloc"):
        return [sys.executable, "-m", "benchmarks.omnimalloc_peer", peer, str(path), str(out),
                f"{limit:g}"], REPO
    limits = ["--time-limit", f"{limit:g}"] if pipeline else \
        ["--no-exact", "--heuristic-time-limit", f"{limit:g}"]
    return [sys.executable, "-m", "memplan.cli", "solve", str(path), "--capacity", "none",
            *limits, "--csv", str(out), "--quiet"], REPO if peer == "memplan" else BASE


def timed(line: list[str], checkout: Path) -> tuple[float, float, str]:
    """Run ``line`` in ``checkout``: (wall seconds, peak resident MB of the process, what it
    printed on standard output)."""
    began = time.perf_counter()
    child = subprocess.Popen(line, cwd=checkout, env=dict(os.environ, PYTHONPATH=str(checkout)),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)  # reaped here: Popen is told its exit code
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stdout.close()
    return time.perf_counter() - began, usage.ru_maxrss / 1024, output


def main(argv: list[str] | None = None) -> int:
    global BASE
    parser = argparse.ArgumentParser(prog="python -m benchmarks.heuristic_search",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("minimalloc", "traces"), default="minimalloc")
    parser.add_argument("--variant", default="original", help="original,reversed,relabelled")
    parser.add_argument("--problem", default="", help="only these (comma-separated)")
    parser.add_argument("--peer", default="memplan,base,tabu,supermalloc")
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--base", type=Path, help="another memplan checkout (peer 'base')")
    parser.add_argument("--pipeline", action="store_true",
                        help="memplan and base: the whole pipeline (heuristics, exact lanes)")
    args = parser.parse_args(argv)
    BASE = args.base
    peers = tuple(args.peer.split(","))
    ratios: dict[str, list[float]] = {peer: [] for peer in peers}
    print("| problem | bound | " + " | ".join(f"{p} arena/bound (s, MB)" for p in peers) + " |")
    print("|---|---|" + "---|" * len(peers))
    with tempfile.TemporaryDirectory() as folder:
        for name, problem in problems(args.suite, tuple(args.variant.split(",")),
                                      tuple(filter(None, args.problem.split(",")))):
            path = Path(folder) / "problem.csv"
            write_csv(path, problem)
            bound, cells = lower_bound(problem), []
            for peer in peers:
                out = Path(folder) / f"{peer}.csv"
                out.unlink(missing_ok=True)
                seconds, memory, _ = timed(*command(peer, path, out, args.time_limit,
                                                 args.pipeline))
                status, arena, _ = judge(problem, out, fit=False)
                if arena is None or status != "valid":
                    cells.append(f"{status}")
                    continue
                ratios[peer].append(arena / bound)
                cells.append(f"{arena / bound:.5f} ({seconds:.1f}, {memory:.0f})")
            print(f"| {name} | {bound} | " + " | ".join(cells) + " |", flush=True)
    means = [math.exp(sum(map(math.log, r)) / len(r)) if r else float("nan")
             for r in ratios.values()]
    print("| geomean | | " + " | ".join(f"{m:.5f}" for m in means) + " |")
    return 0


BASE: Path | None = None

if __name__ == "__main__":
    sys.exit(main())
