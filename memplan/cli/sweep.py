"""``memplan sweep``: the command line of `memplan.sweeps.sweep.sweep`.

::

    memplan sweep models/ --batch 1,2,4,8 --capacity none,256KiB,1MiB \\
        --planners best,exact --time-limit 60 --workers 2 -o rows.csv --report report.html

Lists are comma-separated; ``--dim NAME=V1,V2`` is repeatable. The rows go
to ``-o`` as they finish (the same command again resumes); without
``-o`` the table is printed. A progress bar on a terminal, a summary at
the end, ``--report`` an HTML page of figures (`memplan.sweeps.sweep_report`).
Exit codes: 0 every task ran (infeasible capacities are answers, not
failures); 1 some task failed (its row says why); 2 bad usage or input;
130 interrupted (the finished rows are kept).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memplan.cli.checks import check_output_path, count, seconds, size
from memplan.cli.exit_codes import FAILED, INTERRUPTED, OK
from memplan.cli.parser import Parents, add_deprecated
from memplan.errors import ProblemError
from memplan.sweeps.sweep import FROM_FILE, parse_size


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, "
                                         f"got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got {text!r}")
    return values


def _dim(text: str) -> tuple[str, list[int]]:
    name, _, values = text.partition("=")
    if not name or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,..., got {text!r}")
    return name, _ints(values)


def _sizes(text: str) -> list:
    try:
        sizes = [parse_size(v) for v in text.split(",") if v.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not sizes:
        raise argparse.ArgumentTypeError(f"expected capacities (bytes, with a unit, 'none' or "
                                         f"'file'), got {text!r}")
    return sizes


def _value(text: str):
    """An option's value: a number, true/false, none, a comma list (a tuple), else text."""
    words = {"true": True, "false": False, "none": None}
    if text.lower() in words:
        return words[text.lower()]
    if "," in text:
        return tuple(v for v in text.split(",") if v)
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _option(text: str) -> tuple[str, str, object]:
    planner, dot, rest = text.partition(".")
    name, equals, value = rest.partition("=")
    if not (planner and dot and name and equals):
        raise argparse.ArgumentTypeError(f"expected PLANNER.NAME=VALUE, got {text!r}")
    return planner, name, _value(value)


BYTE_COLUMNS = ("capacity", "lower_bound", "arena_size", "best_bound", "peak_memory")


def _shown(table):
    """The rows as printed: bytes in human units, the gap in percent (``-o`` keeps the
    exact numbers)."""
    from memplan.viz import human_bytes

    shown = table.drop(columns=["task", "path", "settings", "worker"])
    for column in BYTE_COLUMNS:
        shown[column] = shown[column].map(lambda v: human_bytes(int(v)), na_action="ignore")
    shown["gap"] = shown["gap"].map(lambda g: f"{g:.2%}", na_action="ignore")
    return shown.astype(object).fillna("")


def add_command(sub, shared: Parents) -> None:
    """``memplan sweep``: what to sweep, the planners' options, where it runs, the outputs."""
    parser = sub.add_parser("sweep", parents=[shared.common],
                            help="plan many models x shapes x capacities x planners, on Dask")
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="ONNX, CSV or JSON files, or folders holding them")
    grid = parser.add_argument_group("what to sweep (comma-separated lists)")
    grid.add_argument("--dim", type=_dim, action="append", default=[], metavar="NAME=V1,V2",
                      help="values of a symbolic ONNX dimension (repeatable)")
    grid.add_argument("--batch", type=_ints, metavar="B1,B2",
                      help="re-batch ONNX models: the leading dimension of the graph inputs")
    grid.add_argument("--capacity", type=_sizes, default=[FROM_FILE], metavar="C1,C2",
                      help="capacities: bytes or with a unit (256KiB, 1MiB), 'none' to "
                           "minimise, 'file' for the file's own (default)")
    planners = grid.add_argument("--planners", default="best", metavar="A,B,...|all",
                                 help="registered planners, 'solve' (heuristics then exact), "
                                      "'all' (every heuristic and exact) (default: best)")
    add_deprecated(grid, "--planner", planners)
    grid.add_argument("--alignment", type=size("--alignment"), metavar="BYTES",
                      help="align every offset to this many bytes (64, 4KiB)")
    plan = parser.add_argument_group("planner options")
    plan.add_argument("--time-limit", type=seconds("--time-limit"), default=10.0, metavar="S",
                      help="seconds for each exact (or solve) task (default: 10; 'none')")
    plan.add_argument("--heuristic-time-limit", type=seconds("--heuristic-time-limit"),
                      default=1.0, metavar="S",
                      help="seconds for each searching heuristic (default: 1)")
    plan.add_argument("--seed", type=int, default=0, help="random seed of every planner")
    plan.add_argument("--threads", type=count("--threads"), default=1,
                      help="CP-SAT threads per exact task (default: 1; tasks run in parallel)")
    plan.add_argument("--option", type=_option, action="append", default=[],
                      metavar="PLANNER.NAME=VALUE",
                      help="a planner's own option, e.g. hill_climb.iterations=500 or "
                           "exact.orders=total,lifetime (repeatable)")
    engine = parser.add_argument_group("where it runs")
    engine.add_argument("--workers", type=count("--workers"), metavar="N",
                        help="worker processes of the local cluster (default: one per core)")
    engine.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                        help="run on this existing Dask cluster instead")
    engine.add_argument("--retries", type=int, default=1,
                        help="re-runs of a task that raised (a dead worker's tasks are "
                             "re-run by Dask, up to its allowed-failures, 3 by default)")
    output = parser.add_argument_group("output")
    rows = output.add_argument("-o", "--output", metavar="ROWS.csv|.parquet",
                               help="write rows as they finish; the same command again "
                                    "resumes")
    add_deprecated(output, "--out", rows)
    output.add_argument("--no-resume", dest="resume", action="store_false",
                        help="run every task even when --output has its row")
    output.add_argument("--report", metavar="REPORT.html",
                        help="an HTML page of figures: arena vs batch, planners vs the "
                             "optimum, the smallest capacity that fits every model; every "
                             "row's plan viewable (pages in REPORT_files/)")
    output.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from memplan.cli.progress import on_terminal
    from memplan.sweeps.sweep import sweep
    from memplan.sweeps.sweep_progress import SweepProgress, summary

    for option, path in (("-o", args.output), ("--report", args.report)):
        if path:  # before any task runs
            check_output_path(path, option)
    if args.report:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ProblemError("--report needs matplotlib: pip install 'memplan[plot]'",
                               file=args.report) from None
    options: dict[str, dict] = {}
    for planner, name, value in args.option:
        options.setdefault(planner, {})[name] = value
    progress = SweepProgress() if not args.quiet and on_terminal() else None
    plans = None if not args.report else \
        str(Path(args.report).with_name(f"{Path(args.report).stem}_files") / "plans")
    table = sweep(args.models, dims=dict(args.dim), batches=args.batch,
                  capacities=args.capacity, planners=args.planners.split(","),
                  time_limit=args.time_limit, heuristic_time_limit=args.heuristic_time_limit,
                  seed=args.seed, threads=args.threads, alignment=args.alignment, options=options,
                  scheduler=args.scheduler, workers=args.workers, out=args.output,
                  resume=args.resume, retries=args.retries, progress=progress, plans=plans)
    if args.report:
        from memplan.sweeps.sweep_report import write_report

        write_report(table, args.report, plans=plans)
    if not args.output and not args.quiet:
        print(_shown(table).to_string(index=False))
    if not args.quiet:
        lines = summary(table, out=args.output)
        if args.report:
            lines.append(f"wrote       {args.report}")
        print("\n".join(lines), file=sys.stderr if not args.output else sys.stdout)
    if table.attrs.get("interrupted"):
        return INTERRUPTED
    return FAILED if (table["status"] == "error").any() else OK


__all__ = ["add_command", "run"]
