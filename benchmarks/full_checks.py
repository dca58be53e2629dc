"""The test suite's costliest checks at full size: ``python -m benchmarks.full_checks``.

The suite runs each of these on a share of its cases, so that installing and testing
stays within minutes on two cores; here they run whole, with the same assertions, and
print their seconds (wall and CPU) and load average. Exit code 1 when one fails.

- ``explain-cores``: 36 capacity reasons on random problems with aliases, conflicts
  and alignment, each core checked infeasible alone and minimal by the exact planner
  (`tests.test_explain_cores.reasons_checked`; the suite checks 14);
- ``exhaustive-orders``: the tests' exhaustive optimum (a branch and bound over the
  drop orders, `tests.test_canonical.exhaustive_optimum`) against the drop of every
  one of the n! orders, on the nudged tilings of 8 to 10 buffers the suite plans
  (the suite compares the two on problems of up to 6 buffers).

    python -m benchmarks.full_checks [--check explain-cores,exhaustive-orders]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def explain_cores() -> str:
    from tests.test_explain_cores import reasons_checked

    kinds, wide = reasons_checked(2029, 36)
    assert wide >= 5 and kinds.get("packing", 0) >= 3 and kinds.get("live_load", 0) >= 3, kinds
    return f"36 reasons {kinds}, {wide} problems with a wide alias group"


def exhaustive_orders() -> str:
    from tests.test_canonical import every_order_optimum, exhaustive_optimum
    from tests.test_canonical_packings import nudged, tiling

    sizes = []
    for seed in range(60):  # the cases of test_nudged_tilings_agree_with_the_exhaustive_optimum
        problem = nudged(tiling(seed, 4 + seed % 4, steps=8, capacity=12),
                         np.random.default_rng(1000 + seed))
        if len(problem) >= 8:
            assert exhaustive_optimum(problem) == every_order_optimum(problem), seed
            sizes.append(len(problem))
    return f"{len(sizes)} tilings of {min(sizes)}-{max(sizes)} buffers: the same optimum"


CHECKS = {"explain-cores": explain_cores, "exhaustive-orders": exhaustive_orders}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.full_checks",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", default=",".join(CHECKS),
                        help=f"comma-separated, of: {', '.join(CHECKS)}")
    names = [name for name in parser.parse_args(argv).check.split(",") if name]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check {unknown[0]!r}; valid: {', '.join(CHECKS)}")
    failed = 0
    for name in names:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            result = CHECKS[name]()
        except AssertionError as error:
            result, failed = f"FAILED: {error}", failed + 1
        print(f"{name}: {result}; {time.perf_counter() - wall:.1f} s wall, "
              f"{time.process_time() - cpu:.1f} s CPU, load average before {load}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
