"""Time one best-fit pass per MiniMalloc problem: ``python -m benchmarks.pass_time FOLDER``.

One pass is ``greedy_by_size`` end to end (alias units, size order, best fit,
the plan and its bound): the unit of work of the order searches
(`memplan.heuristics.order_search`). Prints problem, buffers and the median
of 5 runs; the figures go to BENCHMARKS.md with the load average.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import memplan
from memplan import plan_with


def main(folder: str) -> None:
    for path in sorted(Path(folder).glob("*.csv")):
        problem = memplan.load(path)
        times = []
        for _ in range(5):
            began = time.perf_counter()
            plan_with("greedy_by_size", problem)
            times.append(time.perf_counter() - began)
        print(f"{path.stem}\t{len(problem)}\t{statistics.median(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
