"""``memplan view``: plans as one interactive HTML page, and the checks of figure outputs.

::

    memplan view PLAN.json [PLAN2.json ...] [-o VIEW.html]
    memplan view PROBLEM PLAN [PLAN2 ...]   [-o VIEW.html]

A plan file needs its problem: ``memplan solve -o plan.json`` writes both in
one document (``{"problem": ..., "plan": ...}``), so that file alone is
enough; a second file of the same problem (such a document, a plan-only
document, or a MiniMalloc CSV solution) is drawn beside it on the same axes.
Otherwise the first file is the problem (any model `memplan.load` reads) and
the following ones are its plans. Every plan is checked by
`memplan.validate` first: an invalid one is still drawn (the page lists its
violations, to look at them) and the command exits 1.

The page is checked before anything is read (`memplan.cli.checks.check_html_path`).
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path

from memplan import api
from memplan.cli import models
from memplan.cli.checks import check_html_path
from memplan.cli.exit_codes import FAILED, OK
from memplan.cli.parser import Parents
from memplan.errors import ProblemError
from memplan.formats import memplan_json, minimalloc_csv
from memplan.output_files import open_replacing
from memplan.plan import Plan, fits
from memplan.problem import Problem
from memplan.validate import validate
from memplan.viz_html import page, plan_title


def _holds_plan(path: Path) -> bool:
    """Whether a .json file is a problem-and-plan document (``memplan solve -o``)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        with open(path) as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return False  # memplan.load says what is wrong with it
    return isinstance(document, dict) and "plan" in document


def read_plan_file(path: Path, problem: Problem) -> Plan:
    """A plan of ``problem`` from memplan JSON or a MiniMalloc CSV solution."""
    if path.suffix.lower() == ".csv":
        _, offsets = minimalloc_csv.read_solution(path, capacity=None)
        missing = [id for id in problem.ids if id not in offsets]
        if missing or len(offsets) != len(problem):
            raise ProblemError(f"not a plan of this problem (buffers missing: {missing[:5]})",
                               file=str(path))
        return Plan.from_offsets(problem, [offsets[id] for id in problem.ids],
                                 planner=path.stem)
    return memplan_json.read_plan(path, problem)


def load_plans(files: list[str], load=None) -> tuple[Problem, dict[str, Plan]]:
    """The problem and the plans the files name (see the module doc), titled by file;
    ``load(path)`` reads the first (default `memplan.api.load`; the command line binds its
    model options: ``--dim``, ``--alignment``, the ONNX flags)."""
    paths = [Path(f) for f in files]
    problem = (load or api.load)(paths[0])
    plan_paths = paths if _holds_plan(paths[0]) else paths[1:]
    if not plan_paths:
        raise ProblemError("holds a problem but no plan: give its plan too "
                           "(memplan view PROBLEM PLAN), or the file 'memplan solve -o "
                           "plan.json' writes", file=files[0])
    plans: dict[str, Plan] = {}
    for path in plan_paths:
        plan = read_plan_file(path, problem)
        title = f"{path.name}: {plan_title(plan)}"
        plans[title if title not in plans else f"{title} ({len(plans) + 1})"] = plan
    return problem, plans


def _violations(problem: Problem, plans: dict[str, Plan]) -> dict[str, list]:
    """Each plan's violations (an over-capacity plan whose status says so is not one)."""
    found = {}
    for title, plan in plans.items():
        wrong = [v for v in validate(problem, plan)
                 if not (v.kind == "capacity" and not fits(plan))]
        if wrong:
            found[title] = wrong
        else:
            memplan_json.check_claims(plan, title.partition(": ")[0])  # its file
    return found


def run(args: argparse.Namespace) -> int:
    """``memplan view``: the page written; exit 1 when a plan drawn is invalid."""
    check_html_path(args.output, "-o")
    problem, plans = load_plans(args.files,
                                lambda path: models.load(str(path), args, own_capacity=False))
    output = args.output or str(Path(args.files[-1]).with_suffix(".html"))
    check_html_path(output, "-o")
    invalid = _violations(problem, plans)
    notes = "".join(
        f"<p class='bad'>{html.escape(title)}: INVALID, {len(found)} violations: "
        f"{html.escape('; '.join(map(str, found[:5])))}</p>" for title, found in invalid.items())
    with open_replacing(output, "w", encoding="utf-8") as handle:
        handle.write(page(problem, plans, title=args.title, notes=notes))
    for title, found in invalid.items():
        print(f"memplan view: {title}: INVALID, {len(found)} violations (first: {found[0]}); "
              f"drawn anyway", file=sys.stderr)
    print(f"wrote {output}: {len(problem):,} buffers, {len(plans)} "
          f"plan{'s' if len(plans) > 1 else ''}")
    return FAILED if invalid else OK


def add_command(sub, shared: Parents) -> None:
    """``memplan view``: the files, the page to write and its title."""
    view = sub.add_parser("view", parents=[shared.common, shared.model],
                          help="plans as one interactive HTML page: pan and zoom, hover a "
                               "tensor, live bytes, two plans on one axis")
    view.add_argument("files", nargs="+", metavar="FILE",
                      help="PLAN.json as 'memplan solve -o' writes it (problem and plan), "
                           "then other plans of the same problem to draw beside it; or "
                           "PROBLEM (ONNX, TFLite, CSV, JSON) then its plans (.json, or "
                           ".csv solutions)")
    view.add_argument("-o", "--output", metavar="VIEW.html",
                      help="the page to write (default: the last file's name with .html)")
    view.add_argument("--title", help="the page's title (default: the problem's name and size)")
    view.set_defaults(run=run)


__all__ = ["add_command", "load_plans", "read_plan_file", "run"]
