"""``python -m memplan.cli.tflm_proof MODEL.tflite``: plan a model and prove the plan in TFLM.

Beside ``memplan prove`` (a plan file): this plans the model with memplan
itself and also finds the smallest arena each planner runs with
(`memplan.tflite.tflm_arena.prove`); exit 0 when proven, 1 when not, 2 on bad
input.
"""

from __future__ import annotations

import argparse
import sys

from memplan.cli.exit_codes import BAD_INPUT, FAILED, OK
from memplan.errors import ProblemError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memplan.cli.tflm_proof",
        description="Plan a .tflite model with memplan and prove the plan in TFLite-Micro "
                    "beside TFLM's own planner.")
    parser.add_argument("model", help="a .tflite model")
    parser.add_argument("--time-limit", type=float, default=10,
                        help="seconds for memplan's exact planner")
    parser.add_argument("--seed", type=int, default=0, help="random inputs and planners")
    parser.add_argument("--no-bisect", action="store_true",
                        help="skip the search for the smallest working arena sizes")
    args = parser.parse_args(argv)
    from memplan.tflite.tflm_arena import prove

    try:
        report = prove(args.model, seed=args.seed, bisect=not args.no_bisect,
                       time_limit=args.time_limit)
    except ProblemError as error:
        print(f"error: {error}", file=sys.stderr)
        return BAD_INPUT
    print(report)
    return OK if report.ok else FAILED


if __name__ == "__main__":
    sys.exit(main())
