"""``memplan validate PROBLEM PLAN``: check a plan file against its problem.

`memplan.validate` (the independent checker) lists every violation: overlaps,
misalignment, broken aliases, pinned buffers moved, capacity exceeded. A
MiniMalloc CSV solution has one row per alias group; its members are put back
before the check.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memplan import api
from memplan.cli.exit_codes import FAILED, OK
from memplan.cli.models import load
from memplan.cli.parser import MODEL_KINDS, Parents
from memplan.cli.summary import gap_text
from memplan.formats import memplan_json, minimalloc_csv
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.validate import validate
from memplan.viz import show_bytes


def add_command(sub, shared: Parents) -> None:
    """``memplan validate``: a problem and its plan."""
    check = sub.add_parser("validate", parents=[shared.common, shared.model, shared.capacity],
                           help="check a plan (.json or .csv solution) against its problem")
    check.add_argument("problem", help=MODEL_KINDS)
    check.add_argument("plan")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(run=run)


def _read_plan(path: str, problem: Problem) -> Plan | dict[str, int]:
    """A memplan JSON plan, or a MiniMalloc CSV solution's offsets by buffer."""
    if Path(path).suffix.lower() == ".csv":  # one row per alias group: members put back
        return minimalloc_csv.expand_offsets(
            problem, minimalloc_csv.read_solution(path, capacity=None)[1])
    return memplan_json.read_plan(path, problem)


def run(args: argparse.Namespace) -> int:
    """``memplan validate``: every violation printed (the first 20), or the arena and gap."""
    problem = load(args.problem, args)
    plan = _read_plan(args.plan, problem)
    violations = validate(problem, plan)
    if not violations and isinstance(plan, Plan):
        memplan_json.check_claims(plan, args.plan)
    if args.json:
        print(json.dumps({"problem": args.problem, "plan": args.plan, "valid": not violations,
                          "violations": [dict(kind=v.kind, buffers=list(v.buffers),
                                              message=v.message) for v in violations]}))
    elif violations:
        for violation in violations[:20]:
            print(violation)
        more = " (first 20 shown)" if len(violations) > 20 else ""
        print(f"{args.plan}: INVALID, {len(violations)} violations{more}")
    else:
        arena = plan.arena_size if isinstance(plan, Plan) else \
            max((plan[b.id] + b.size for b in problem.buffers), default=0)
        bound = api.lower_bound(problem)
        print(f"{args.plan}: valid, arena {show_bytes(arena)}, {gap_text(arena, bound)} to the "
              f"lower bound")
    return FAILED if violations else OK
