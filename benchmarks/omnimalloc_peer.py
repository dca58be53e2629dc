"""One omnimalloc planner on one MiniMalloc CSV, as a process of its own (for `benchmarks.peers`).

    python -m benchmarks.omnimalloc_peer supermalloc|tabu PROBLEM.csv SOLUTION.csv SECONDS

Reads the problem with omnimalloc's own CSV reader, runs SuperMalloc (its
portfolio branch and bound, minimising the peak) or its tabu search with the
time limit, and writes the solution (``id,lower,upper,size,offset``).
omnimalloc is in the optional ``peers`` extra; without it this exits with 3.
"""

from __future__ import annotations

import csv
import sys


def main(argv: list[str]) -> int:
    peer, source, target, seconds = argv[0], argv[1], argv[2], float(argv[3])
    try:
        from omnimalloc.allocators import SupermallocAllocator, TabuSearchAllocator
        from omnimalloc.io import load_allocation
    except ImportError:
        print('omnimalloc is not installed (pip install -e ".[peers]")', file=sys.stderr)
        return 3
    allocator = {"supermalloc": SupermallocAllocator, "tabu": TabuSearchAllocator}[peer]
    pool = load_allocation(source)
    placed = allocator(timeout=seconds).allocate(pool.allocations)
    with open(target, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "lower", "upper", "size", "offset"])
        for a in placed:
            writer.writerow([a.id, a.start, a.end, a.size, a.offset])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
