"""``memplan explain [MODEL]``: where the peak comes from, and what would help.

`memplan.diagnosis.explain` names the steps and tensors of the peak, where a
plan's gap to the bound lies, why a capacity cannot be met (live load, pins,
or a CP-SAT core within ``--time-limit``), and measured remedies.
"""

from __future__ import annotations

import argparse
import json

from memplan import api
from memplan.cli import checks
from memplan.cli.checks import UsageError, check_figure_path
from memplan.cli.exit_codes import FAILED, OK
from memplan.cli.models import load
from memplan.cli.parser import MODEL_KINDS, Parents, add_deprecated
from memplan.diagnosis.explain import explain


def add_command(sub, shared: Parents) -> None:
    """``memplan explain``: a model, the plan to explain, the limits of the checks."""
    why = sub.add_parser("explain", parents=[shared.common, shared.model, shared.capacity],
                         help="where the peak comes from, a plan's gap, why a capacity "
                              "cannot be met, and what would help",
                         epilog="Exit codes: 0 no capacity, or it fits; 1 the capacity is "
                                "not met: ruled out (live load, pins, packing) or undecided "
                                "within --time-limit (the JSON's capacity.kind says which); "
                                "2 bad usage or bad input.")
    why.add_argument("model", nargs="?", help=f"{MODEL_KINDS} (default: a bundled model)")
    why.add_argument("--planner", default="best", metavar="NAME|none",
                     help="the plan whose gap to explain (default: best; none: no plan)")
    why.add_argument("--time-limit", default=10.0, metavar="S",
                     type=checks.seconds("--time-limit", unlimited=False),
                     help="seconds for the CP-SAT checks of a capacity (default: 10)")
    threads = why.add_argument("--threads", type=checks.count("--threads"), default=1,
                               help="CP-SAT threads (default: 1)")
    add_deprecated(why, "--workers", threads, type=checks.count("--workers"))
    why.add_argument("--plot", metavar="FILE.png", help="draw the plan's layout with its gap "
                     "marked (no gap: live bytes, peak and capacity)")
    why.add_argument("--json", action="store_true", help="print as JSON")
    why.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``memplan explain``: the explanation as text or JSON, the figure with ``--plot``;
    exit 1 when the capacity is not met."""
    check_figure_path(args.plot)
    problem = load(args.model, args)
    plan = None if args.planner == "none" else api.plan_with(args.planner, problem, seed=0)
    found = explain(problem, plan, time_limit=args.time_limit, workers=args.threads)
    if args.plot:
        try:
            (found.plotgap_text() if found.gap else found.plot()).figure.savefig(args.plot, dpi=120)
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'memplan[plot]'") from None
    print(json.dumps(found.to_dict(), indent=1) if args.json else found)
    fits = found.capacity is None or found.capacity.kind == "fits"
    return OK if fits else FAILED
