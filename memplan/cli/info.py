"""``memplan info [MODEL]``: what a model asks of the planners, before any planning.

Buffers and steps by kind, the lower bound, widths, aliases, conflicts, pins,
the capacity, the largest tensors (`memplan.api.info`), the operator order's
bound after ``--reorder``, and whether the compiled kernels are loaded.
"""

from __future__ import annotations

import argparse
import json

import memplan
from memplan import api
from memplan.cli.exit_codes import OK
from memplan.cli.models import load
from memplan.cli.parser import MODEL_KINDS, Parents
from memplan.cli.summary import order_row, order_summary, print_rows
from memplan.viz import human_bytes, show_bytes


def add_command(sub, shared: Parents) -> None:
    """``memplan info``: a model, how many tensors to list."""
    describe = sub.add_parser("info", parents=[shared.common, shared.model, shared.reordering],
                              help="buffers, lower bound, widths, aliases, largest tensors")
    describe.add_argument("model", nargs="?", help=f"{MODEL_KINDS} (default: a bundled model)")
    describe.add_argument("--largest", type=int, default=10, help="how many tensors to list")
    describe.add_argument("--json", action="store_true", help="print as JSON")
    describe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``memplan info``: the facts of `memplan.api.info` as rows, or as JSON."""
    facts = api.info(load(args.model, args), largest=args.largest)
    facts["order"] = order_summary(getattr(args, "reordering", None))
    facts["kernels"] = memplan.kernels()
    if args.json:
        print(json.dumps(facts, indent=1))
        return OK
    bound = facts["lower_bound"]
    rows = [("problem", f"{facts['name']}  ({facts['source']})"),
            ("buffers", f"{facts['buffers']} over {facts['steps']} steps ("
                        + ", ".join(f"{n} {kind}" for kind, n in facts["kinds"].items()) + ")"),
            ("lower bound", show_bytes(bound)),
            ("total size", show_bytes(facts["total_size"])),
            ("widths", f"max {human_bytes(facts['max_width'])}, "
                       f"mean {human_bytes(facts['mean_width'])} per step"),
            ("aliases", f"{facts['aliases']} mandatory, {facts['optional_aliases']} optional"),
            ("conflicts", str(facts["conflicts"])), ("pinned", str(facts["pinned"])),
            ("capacity", "none" if facts["capacity"] is None else show_bytes(facts["capacity"]))]
    if facts["order"]:
        rows.append(order_row(facts["order"]))
    rows.append(("kernels", kernel_line()))
    print_rows(rows)
    print("largest tensors:")
    for t in facts["largest"]:
        print(f"  {human_bytes(t['size']):>10}  [{t['start']}, {t['end']})  {t['kind']:<10} "
              f"{t['id']}")
    return OK


def kernel_line() -> str:
    """Whether the compiled kernels are loaded, for ``memplan info``."""
    missing = [name for name, loaded in memplan.kernels().items() if not loaded]
    if not missing:
        return "compiled (canonical search, placement pass, order search, ONNX reader)"
    return (f"not loaded: {', '.join(missing)} (plans are the same, slower; "
            f"reinstall with a C compiler)")
