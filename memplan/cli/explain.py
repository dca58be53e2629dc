"""``memplan explain [MODEL]``: where the peak comes from, and what would help.

`memplan.diagnosis.explain` names the steps and tensors of the peak, where a
plan's gap to the bound lies, why a capacity cannot be met (live load, pins,
or a CP-SAT core), and measured remedies; ``--time-limit`` bounds it all, from
the command's start. With ``--regions fast=448KiB,slow``,
`memplan.diagnosis.region_curve` instead: what fills the fast region at its peak,
and what a larger one would save per KiB. ``-o FILE.json`` writes the
explanation as JSON beside what is printed (``--quiet``: nothing printed).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from memplan.budget import command_left
from memplan.cli import checks
from memplan.cli.checks import UsageError, check_figure_path, warn_beyond_limit
from memplan.cli.exit_codes import FAILED, OK
from memplan.cli.models import load
from memplan.cli.parser import MODEL_KINDS, Parents, add_deprecated
from memplan.diagnosis.explain import explain, plan_in_time
from memplan.errors import ProblemError
from memplan.formats.memplan_json import json_text
from memplan.output_files import check_output, write_atomically
from memplan.problem import Problem, Region
from memplan.shares import (
    CEILING_CPU_PER_BUFFER,
    COMMAND_LEAST_SHARE,
    EXPLAIN_CPU_PER_BUFFER,
    EXPLAIN_PLAN_SHARE,
)


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
                     type=checks.seconds("--time-limit"),
                     help="seconds for the whole command, counted from its start: the "
                          "plan (a third, in CPU seconds), then the capacity reason and the "
                          "remedies ('none': no limit) (default: 10)")
    why.add_argument("--seed", type=int, default=0, metavar="N",
                     help="seed of the planner whose plan is explained (default: 0)")
    threads = why.add_argument("--threads", type=checks.count("--threads"), default=1,
                               help="CP-SAT threads (default: 1)")
    add_deprecated(why, "--workers", threads, type=checks.count("--workers"))
    why.add_argument("--plot", metavar="FILE.png", help="draw the plan's layout with its gap "
                     "marked (no gap: live bytes, peak and capacity)")
    why.add_argument("--json", action="store_true", help="print as JSON")
    why.add_argument("-o", "--output", metavar="FILE.json",
                     help="write the explanation as JSON to this file")
    why.add_argument("--quiet", action="store_true", help="print nothing (exit code only)")
    regions = why.add_argument(
        "--regions", type=region_list, metavar="NAME=SIZE,...",
        help="memory regions, fastest first (the last may have no size): what fills "
             "the fast region at its peak, what a larger one would save")
    add_deprecated(why, "--banks", regions)
    why.set_defaults(run=run)


def region_list(text: str) -> list[Region]:
    """``fast=448KiB,slow[=SIZE]`` as regions costing 0, 1, 2... per byte (fastest first)."""
    regions = []
    for rank, item in enumerate(text.split(",")):
        name, _, size = item.strip().partition("=")
        try:
            capacity = checks.size("--regions")(size) if size else None
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"--regions: region {name!r}: give a size such "
                                             f"as 448KiB, got {size!r}") from None
        regions.append(Region(name, capacity, float(rank)))
    if len(regions) < 2 or regions[0].capacity is None:
        raise argparse.ArgumentTypeError("--regions: give two regions or more, the first "
                                         "(the fast one) with a size: fast=448KiB,slow")
    return regions


def explain_with_regions(problem: Problem, regions: list[Region], args: argparse.Namespace):
    """The problem over ``regions`` planned (heuristic, then exact within --time-limit),
    every buffer read as often as its steps say; its fast region explained."""
    from memplan.deploy.regions import plan_regions
    from memplan.deploy.regions_exact import plan_regions_exact
    from memplan.diagnosis.region_curve import explain_regions, step_reads

    placed = problem.replace(regions=regions)
    reads = np.maximum(step_reads(placed), 1)
    limit = math.inf if args.time_limit is None else args.time_limit
    plan = plan_regions_exact(placed, time_limit=command_left(limit), threads=args.threads,
                              hint=plan_regions(placed, reads=reads), reads=reads)
    if plan.stats["over_capacity"]:
        over = ", ".join(plan.stats["over_capacity"])
        raise ProblemError(f"the model does not fit the regions ({over} over): a larger "
                           f"region, or memplan explain --capacity on one arena says why")
    return explain_regions(placed, plan, reads=reads)


def run(args: argparse.Namespace) -> int:
    """``memplan explain``: plan with ``--planner`` (`EXPLAIN_PLAN_SHARE` of the time left, in CPU
    seconds), explain with the rest (``--time-limit`` counts from the command's start, like
    ``solve``'s; one line first when the work no limit cuts cannot fit it,
    `warn_beyond_limit`); the explanation as text or JSON, the figure with ``--plot``; exit
    1 when the capacity is not met."""
    check_figure_path(args.plot)
    if args.output:
        check_output(args.output, "-o", suffixes=(".json",))
    problem = load(args.model, args)
    if args.regions:
        _show(explain_with_regions(problem, args.regions, args), args)
        return OK
    warn_beyond_limit("explain", len(problem), args.time_limit,
                      "the explanation" if args.planner == "none" else
                      "one plan, its check and the explanation",
                      per_buffer=EXPLAIN_CPU_PER_BUFFER + (args.planner != "none") *
                      CEILING_CPU_PER_BUFFER)
    limit = math.inf if args.time_limit is None else args.time_limit
    wall = command_left(limit) - COMMAND_LEAST_SHARE * limit if math.isfinite(limit) else math.inf
    plan = None if args.planner == "none" else plan_in_time(
        args.planner, problem, EXPLAIN_PLAN_SHARE * command_left(limit), wall, seed=args.seed)
    if args.stop.is_set():  # Ctrl-C while planning: the planner kept its plan, the
        raise KeyboardInterrupt  # command ends
    found = explain(problem, plan, time_limit=command_left(limit), threads=args.threads)
    if args.plot:
        try:
            figure = (found.plot_gap() if found.gap else found.plot()).figure
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'memplan[plot]'") from None
        write_atomically(args.plot, lambda temporary: figure.savefig(temporary, dpi=120))
    _show(found, args)
    fits = found.capacity is None or found.capacity.kind == "fits"
    return OK if fits else FAILED


def _show(found, args: argparse.Namespace) -> None:
    """The explanation to ``-o`` as JSON, and printed (as JSON with ``--json``) unless
    ``--quiet``."""
    text = json_text(found.to_dict()) if args.output or (args.json and not args.quiet) \
        else None
    if args.output:
        write_atomically(args.output, lambda temporary: Path(temporary).write_text(text + "\n"))
    if not args.quiet:
        print(text if args.json else found)


