"""``memplan convert MODEL -o PROBLEM.csv|.json``: a model as a problem file.

MiniMalloc CSV has one row per alias group (``memplan validate`` expands a
solution back) and no place for optional aliases, which are left out and
counted; memplan JSON keeps everything.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memplan.cli.checks import UsageError, check_output_path
from memplan.cli.exit_codes import OK
from memplan.cli.models import load
from memplan.cli.parser import MODEL_KINDS, Parents
from memplan.formats import memplan_json, minimalloc_csv


def add_command(sub, shared: Parents) -> None:
    """``memplan convert``: a model and the problem file to write."""
    convert = sub.add_parser("convert", parents=[shared.common, shared.model],
                             help="write a model as a problem file (.csv or .json)")
    convert.add_argument("model", help=MODEL_KINDS)
    convert.add_argument("-o", "--output", required=True, metavar="PROBLEM.csv|.json")
    convert.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``memplan convert``: the model written as MiniMalloc CSV or memplan JSON."""
    suffix = Path(args.output).suffix.lower()
    writers = {".json": memplan_json.write_problem, ".csv": minimalloc_csv.write_csv}
    if suffix not in writers:
        raise UsageError(f"{args.output}: the output must end in .csv or .json")
    check_output_path(args.output, "-o")
    problem = load(args.model, args)
    writers[suffix](args.output, problem)
    rows = len(minimalloc_csv.csv_rows(problem)[0]) if suffix == ".csv" else len(problem)
    kept = "" if rows == len(problem) else \
        f" in {rows} rows (one per alias group; validate expands a solution back)"
    dropped = int(problem.alias_optional.sum()) if suffix == ".csv" else 0
    left = f"; {dropped} optional aliases left out (CSV has no place for them)" \
        if dropped else ""
    print(f"wrote {args.output}: {len(problem)} buffers{kept}{left}")
    return OK
