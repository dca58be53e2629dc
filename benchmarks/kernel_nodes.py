"""CPU seconds a node of the canonical search: ``python -m benchmarks.kernel_nodes``.

The canonical kernel (`memplan.solver.canonical`) is deterministic on one
thread: the same problem and node budget give the same nodes, verdict and
layout. So two builds of the kernel are compared by what they print here,
run one after the other: the nodes and layout digests must match, the CPU
seconds (user time of this process, which a busy machine disturbs far less
than wall time) say which is faster. Problems: the eleven MiniMalloc problems
at their capacity; A, D, E, F, J at their live-load bound with a node budget
(the searches a lower-bound proof runs); two pinwheel tilings.
"""

from __future__ import annotations

import argparse
import hashlib
import resource

from benchmarks.generate import pinwheel
from benchmarks.suites import find_case
from memplan.bounds import lower_bound
from memplan.solver import canonical


def _cpu() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernel_nodes",
                                     description=__doc__)
    parser.add_argument("--budget", type=int, default=100_000,
                        help="nodes of each search at the live-load bound")
    args = parser.parse_args(argv)
    runs = []
    for name in "ABCDEFGHIJK":
        problem = find_case("minimalloc", name).problem("fit")
        runs.append((name, problem, None))
        if name in "ADEFJ":
            runs.append((f"{name} at its bound", problem.replace(capacity=lower_bound(problem)),
                         args.budget))
    runs += [(f"pinwheel-{n}", pinwheel(n, 0), None) for n in (201, 501)]
    print("| problem | verdict | nodes | layout | CPU s | us a node |\n|---|---|---|---|---|---|")
    total = 0.0
    for name, problem, budget in runs:
        began = _cpu()
        verdict = canonical.fit(problem, threads=1, node_budget=budget)
        seconds = _cpu() - began
        total += seconds
        nodes = verdict.stats["nodes"]
        digest = "-" if verdict.offsets is None else \
            hashlib.md5(verdict.offsets.tobytes()).hexdigest()[:8]
        print(f"| {name} | {verdict.status} | {nodes} | {digest} | {seconds:.2f} | "
              f"{1e6 * seconds / max(nodes, 1):.1f} |", flush=True)
    print(f"\nCPU seconds in all: {total:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
