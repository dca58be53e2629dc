"""``memplan sweep``: the command line of `memplan.sweep`, its options those of `SweepOptions`.

::

    memplan sweep models/ --batch 1,2,4,8 --capacity none,256KiB,1MiB \\
        --planners best,exact --time-limit 60 --workers 2 -o rows.csv --report report.html

Lists are comma-separated; ``--dim NAME=V1,V2`` is repeatable. The rows go
to ``-o`` as they finish (the same command again resumes); without ``-o``
the table is printed (``--json``: as JSON records). A progress bar on a
terminal, a summary at the end, ``--report`` an HTML page of figures
(`memplan.sweeps.sweep_report`).
Exit codes: 0 every task ran (infeasible capacities are answers, not
failures); 1 some task failed (its row says why); 2 bad usage or input;
130 interrupted (the finished rows are kept).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memplan.cli.checks import check_output_path
from memplan.cli.exit_codes import FAILED, INTERRUPTED, OK
from memplan.cli.parser import Parents, add_dataclass_options, options_of
from memplan.errors import ProblemError
from memplan.sweeps.sweep_options import SweepOptions
from memplan.sweeps.sweep_tasks import parse_capacity


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
        sizes = [parse_capacity(v) for v in text.split(",") if v.strip()]
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


def _names(text: str) -> tuple[str, ...]:
    """``A,B,...``: planner names (`memplan.sweeps.sweep_tasks.planner_names` checks them)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def add_command(sub, shared: Parents) -> None:
    """``memplan sweep``: the fields of `SweepOptions` (what to sweep, the planners' options,
    where it runs, the rows' file), the report and the progress shown."""
    parser = sub.add_parser("sweep", parents=[shared.common],
                            help="plan many models x shapes x capacities x planners, on Dask")
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="ONNX, CSV or JSON files, or folders holding them")
    grid = parser.add_argument_group("what to sweep (comma-separated lists)")
    grid.add_argument("--dim", dest="dims", type=_dim, action="append", default=[],
                      metavar="NAME=V1,V2", help="values of a symbolic ONNX dimension "
                                                 "(repeatable)")
    _add_fields(grid, ("batches", "capacities", "planners", "alignment"))
    plan = parser.add_argument_group("planner options")
    _add_fields(plan, ("time_limit", "heuristic_time_limit", "seed", "threads"))
    plan.add_argument("--option", dest="planner_options", type=_option, action="append",
                      default=[], metavar="PLANNER.NAME=VALUE",
                      help="a planner's own option, e.g. hill_climb.iterations=500 or "
                           "exact.orders=total,lifetime (repeatable)")
    _add_fields(parser.add_argument_group("where it runs"), ("workers", "scheduler", "retries"))
    output = parser.add_argument_group("output")
    _add_fields(output, ("out", "resume"))
    output.add_argument("--report", metavar="REPORT.html",
                        help="an HTML page of figures: arena vs batch, planners vs the "
                             "optimum, the smallest capacity that fits every model; every "
                             "row's plan viewable (pages in REPORT_files/)")
    output.add_argument("--json", action="store_true",
                        help="print the rows as JSON records, the exact numbers (without -o)")
    output.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    parser.set_defaults(run=run, plans=None)


def _add_fields(group: argparse._ActionsContainer, only: tuple[str, ...]) -> None:
    """The options of the `SweepOptions` fields ``only``, spelled as every command spells them."""
    add_dataclass_options(
        group, SweepOptions, only=only,
        flags={"batches": "--batch", "capacities": "--capacity", "planners": "--planners",
               "out": ("-o", "--output")},
        renamed={"planners": "--planner", "out": "--out"},
        types={"batches": _ints, "capacities": _sizes, "planners": _names},
        metavars={"batches": "B1,B2", "capacities": "C1,C2", "planners": "A,B,...|all",
                  "alignment": "BYTES", "time_limit": "S", "heuristic_time_limit": "S",
                  "threads": "N", "workers": "N", "scheduler": "tcp://HOST:PORT",
                  "retries": "N", "out": "ROWS.csv|.parquet"})


def _options(args: argparse.Namespace) -> SweepOptions:
    """The sweep's record from the command line (``--report``: its pages' plans folder)."""
    planner_options: dict[str, dict] = {}
    for planner, name, value in args.planner_options:
        planner_options.setdefault(planner, {})[name] = value
    plans = None if not args.report else \
        str(Path(args.report).with_name(f"{Path(args.report).stem}_files") / "plans")
    given = options_of(args, SweepOptions)
    return SweepOptions(**{**given, "dims": dict(args.dims) or None,
                           "planner_options": planner_options or None, "plans": plans})


def run(args: argparse.Namespace) -> int:
    """``memplan sweep``: check the outputs, run the tasks, write the report, print a summary."""
    from memplan.cli.progress import on_terminal
    from memplan.sweeps.sweep import sweep
    from memplan.sweeps.sweep_progress import SweepProgress, summary

    for option, path in (("-o", args.out), ("--report", args.report)):
        if path:  # before any task runs
            check_output_path(path, option)
    if args.report:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ProblemError("--report needs matplotlib: pip install 'memplan[plot]'",
                               file=args.report) from None
    options = _options(args)
    progress = SweepProgress() if not args.quiet and on_terminal() else None
    table = sweep(args.models, options, progress=progress)
    if args.report:
        from memplan.sweeps.sweep_report import write_report

        write_report(table, args.report, plans=options.plans)
    if not args.out and not args.quiet:
        print(table.to_json(orient="records", indent=1) if args.json else
              _shown(table).to_string(index=False))
    if not args.quiet:
        lines = summary(table, out=args.out)
        if args.report:
            lines.append(f"wrote       {args.report}")
        print("\n".join(lines), file=sys.stderr if not args.out else sys.stdout)
    if table.attrs.get("interrupted"):
        return INTERRUPTED
    return FAILED if (table["status"] == "error").any() else OK


__all__ = ["add_command", "run"]
