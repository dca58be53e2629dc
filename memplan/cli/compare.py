"""``memplan compare MODEL...``: every planner on every model, one table.

The gap of each row is to the best bound any planner proved for that model
(`memplan.api.compare`); ``--format`` prints it as an aligned table, CSV (the
exact numbers) or Markdown. ``--time-limit`` bounds the whole command from its
start (the heuristics share half of it, each an equal slice, unless
``--heuristic-time-limit`` gives each its seconds; the shares are CPU seconds, so a
busy machine gives the same table, later, within the limit); Ctrl-C prints the rows
so far and exits 130. ``--json`` prints the rows as JSON records (the exact
numbers), ``-o`` writes the table to a file in the format its suffix names
(`TABLE_SUFFIXES`), ``--quiet`` prints nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memplan import api
from memplan.budget import command_start
from memplan.cli.checks import check_output_path, warn_beyond_limit
from memplan.cli.exit_codes import OK
from memplan.cli.models import load
from memplan.cli.parser import (
    MODEL_KINDS,
    SOLVE_RENAMED,
    Parents,
    add_dataclass_options,
)
from memplan.output_files import write_atomically
from memplan.viz import show_bytes

TABLE_SUFFIXES = {".json": "json", ".csv": "csv", ".md": "markdown"}  # -o: else the table


def add_command(sub, shared: Parents) -> None:
    """``memplan compare``: the models, the planners, their limits and the table's format."""
    compare = sub.add_parser("compare", parents=[shared.common, shared.model, shared.capacity],
                             help="every planner on every model, one table (gap: to the best "
                                  "bound any planner proved for that model)")
    compare.add_argument("models", nargs="+", metavar="MODEL", help=MODEL_KINDS)
    compare.add_argument("--format", choices=("table", "csv", "markdown"), default="table",
                         help="how the table is printed (default: table)")
    compare.add_argument("--json", action="store_true",
                         help="print the rows as JSON records (the exact numbers)")
    compare.add_argument("-o", "--output", metavar="TABLE.csv",
                         help="write the table to this file, its format by suffix (.csv, "
                              ".json, .md; else the aligned table)")
    compare.add_argument("--quiet", action="store_true", help="print nothing (exit code only)")
    compare.add_argument("--planners", metavar="A,B,...|all", default="all",
                         help="planners to run: registered names, or all of them (every "
                              "heuristic and exact; the default)")
    add_dataclass_options(compare, api.SolveOptions, renamed=SOLVE_RENAMED,
                          only=("time_limit", "heuristic_time_limit", "threads", "seed"))
    helps = {"--time-limit": "seconds for the whole command, counted from its start: each "
                             "model an equal share (in CPU seconds), of which the heuristics "
                             "half, the exact planner the rest ('none': no limit) "
                             "(default: 10.0)",
             "--heuristic-time-limit": "seconds each heuristic may take; default: an equal "
                                       "slice of the heuristics' half (1 s without a limit)"}
    for action in compare._actions:
        action.help = helps.get(action.option_strings[0] if action.option_strings else "",
                                action.help)
    compare.set_defaults(run=run)


def _began(limit: float | None) -> float | None:
    """When the limit began: when memplan began to load, unless that leaves the comparison
    less than `COMMAND_LEAST_SHARE` of the limit (then `COMMAND_LEAST_SHARE` of it from now)."""
    if limit is None:
        return None
    return command_start(limit)


def _markdown(table) -> str:
    """The table as a Markdown table, one row per line."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(map(str, row)) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def run(args: argparse.Namespace) -> int:
    """``memplan compare``: read every model (one line when the work no limit cuts needs more
    than ``--time-limit`` + 10 % after the reading, `warn_beyond_limit`), run the planners,
    print the table."""
    if args.output:
        check_output_path(args.output, "-o")  # before any planning
    import pandas  # noqa: F401  (the table's, 0.5-4 s: before the limit's least share is set)
    problems = {}
    for path in args.models:
        problem = load(path, args)
        name = problem.name or Path(path).stem
        problems[name if name not in problems else path] = problem
    warn_beyond_limit("compare", sum(map(len, problems.values())), args.time_limit,
                      "one pass and its check per model")
    planners = None if args.planners == "all" else args.planners.split(",")
    table = api.compare(problems, planners=planners, time_limit=args.time_limit,
                        heuristic_time_limit=args.heuristic_time_limit, seed=args.seed,
                        threads=args.threads, stop=args.stop, began=_began(args.time_limit))
    if table.empty:  # Ctrl-C before the first plan
        raise KeyboardInterrupt
    for name, planners in table.attrs["skipped"].items():
        print(f"memplan compare: {name}: no time left for {', '.join(planners)} "
              f"(--time-limit {args.time_limit:g})", file=sys.stderr)
    if args.output:
        form = TABLE_SUFFIXES.get(Path(args.output).suffix.lower(), "table")
        text = _formatted(table, form)
        write_atomically(args.output, lambda temporary: Path(temporary).write_text(text))
    if not args.quiet:
        print(_formatted(table, "json" if args.json else args.format), end="")
    return OK


def _formatted(table, form: str) -> str:
    """The table as JSON records or CSV (the exact numbers), or shown (bytes with units, the
    gap in percent) as Markdown or an aligned table; one trailing newline."""
    if form == "json":
        return table.to_json(orient="records", indent=1) + "\n"
    if form == "csv":
        return table.to_csv(index=False)
    shown = table.assign(arena=table["arena_size"].map(show_bytes),
                         lower_bound=table["lower_bound"].map(show_bytes),
                         gap=table["gap"].map(lambda g: f"{g:.2%}"),
                         seconds=table["seconds"].map(lambda s: f"{s:.2f}"))
    shown = shown[["problem", "buffers", "planner", "arena", "lower_bound", "gap", "status",
                   "seconds"]]
    return (_markdown(shown) if form == "markdown" else shown.to_string(index=False)) + "\n"
