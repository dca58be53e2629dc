"""What ``memplan solve`` writes: the plan file, a CSV, a figure, a page; checked first.

- `add_output_options`: ``-o/--output`` (in the ``--export`` format, else by
  suffix), ``--csv``, ``--plot`` with ``--window``, ``--addresses`` and
  ``--colour``, ``--html``;
- `check_figures` and `check_outputs` refuse, before any planning, an output
  that could not be written: a missing folder, a suffix matplotlib cannot
  write, a model export without its one model, a CSV that cannot hold the
  problem;
- `write_outputs` writes them once a plan within the capacity exists, each
  through a temporary file renamed over the target (`memplan.output_files`): a
  plan above the capacity (exit 1) writes nothing, and the files asked for
  are left as they were.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memplan import api
from memplan.cli.checks import UsageError, check_figure_path, check_html_path
from memplan.errors import ProblemError
from memplan.formats import minimalloc_csv
from memplan.formats.writers import FORMATS
from memplan.output_files import check_output, write_atomically
from memplan.plan import Plan
from memplan.problem import Problem


def span(text: str) -> tuple[int, int]:
    """``START:END`` (whole numbers, sizes may carry a unit: ``1MiB:2MiB``), START < END."""
    from memplan.limits import parse_size

    low, colon, high = text.partition(":")
    try:
        ends = (parse_size(low), parse_size(high))
    except (ValueError, ProblemError):
        ends = None
    if not colon or ends is None or not all(isinstance(v, int) for v in ends) \
            or not 0 <= ends[0] < ends[1]:
        raise argparse.ArgumentTypeError(f"expected START:END with 0 <= START < END, "
                                         f"got {text!r}")
    return ends


def add_output_options(output: argparse._ActionsContainer) -> None:
    """The options of the files a plan is written to, into the group ``output``."""
    output.add_argument("-o", "--output", metavar="FILE",
                        help="write the plan (format: --export, else by suffix: .json, .h, "
                             ".csv, .onnx, .tflite, .pte, .bin)")
    output.add_argument("--export", choices=FORMATS,
                        help="format of -o: json (problem and plan), c (header), tflm "
                             "(offline plan bytes), csv (MiniMalloc), onnx (model metadata), "
                             "tflite (the model with its TFLM offline plan), pte (the ExecuTorch "
                             "program re-planned)")
    output.add_argument("--csv", metavar="PLAN.csv", help="write the plan as MiniMalloc CSV")
    output.add_argument("--plot", metavar="LAYOUT.png", help="draw the layout (.png, .svg, "
                        ".pdf)")
    output.add_argument("--window", type=span, metavar="START:END",
                        help="--plot only the steps [START, END)")
    output.add_argument("--addresses", type=span, metavar="LOW:HIGH",
                        help="--plot only the addresses [LOW, HIGH) (bytes, or 1MiB:2MiB)")
    output.add_argument("--colour", choices=("alias", "kind", "operator"), default="alias",
                        help="--plot colours: alias groups (default), tensor kind, or the "
                             "type of the producing operator")
    output.add_argument("--html", metavar="VIEW.html", help="an interactive page of the plan "
                        "(beside the best heuristic plan when the exact planner changed it)")


def check_figures(args: argparse.Namespace) -> None:
    """Refuse a ``--plot`` or ``--html`` that could not be written, or figure options
    without ``--plot``, before anything is read."""
    check_figure_path(args.plot)
    check_html_path(args.html)
    if not args.plot and (args.window or args.addresses or args.colour != "alias"):
        raise UsageError("--window, --addresses and --colour shape the --plot figure: "
                         "give --plot FILE.png")


EXPORT_SUFFIXES = {".h": "c", ".csv": "csv", ".onnx": "onnx", ".json": "json", ".bin": "tflm",
                   ".tflite": "tflite", ".pte": "pte"}


MODEL_EXPORTS = {"onnx": ("annotates", "ONNX"), "tflite": ("writes the plan into", "TFLite"),
                 "pte": ("re-plans", "ExecuTorch .pte")}


def write_outputs(args: argparse.Namespace, problem: Problem, plan: Plan,
                  model: Path | None, reordered=None, heuristic: Plan | None = None
                  ) -> dict[str, str]:
    """-o (in the --export format), --csv, --plot and --html (the best ``heuristic`` plan
    beside the final one when they differ); what was written, by option.

    ``model`` is the one model file planned (None for several): the ``onnx`` and
    ``tflite`` exports write the plan into it (the ``onnx`` export in the operator
    order of ``reordered``, a `Reordering`, after ``--reorder``), ``tflm`` takes a
    TFLite model's tensor order from it."""
    from memplan.formats.writers import export

    written = {}
    if args.output:
        fmt = export_format(args)
        suffix = model.suffix.lower() if model is not None else None
        given = model if fmt in MODEL_EXPORTS or (fmt, suffix) in (("tflm", ".tflite"),
                                                                   ("c", ".onnx")) else None
        options = {}
        if fmt == "onnx" and reordered is not None:  # the file, its nodes in the new order
            options["node_order"] = reordered.node_order
        if fmt == "pte" and getattr(args, "method", None) is not None:
            options["method"] = args.method  # the method read, re-planned
        export(problem, plan, fmt, args.output, model=given, **options)
        written[f"output ({fmt})"] = args.output
    if args.csv:
        export(problem, plan, "csv", args.csv)
        written["csv"] = args.csv
    if args.plot:  # checked before solving (check_figure_path)
        from memplan.viz import plot_layout

        ax = plot_layout(problem, plan, window=args.window, addresses=args.addresses,
                         colour=args.colour)
        write_atomically(args.plot, lambda temporary: ax.figure.savefig(temporary, dpi=120))
        written["plot"] = args.plot
    if args.html:
        from memplan.viz_html import write_html

        other = heuristic if heuristic is not None and \
            (heuristic.offsets != plan.offsets).any() else None
        write_html(args.html, problem, plan if other is None else other,
                   other_plan=None if other is None else plan)
        written["html"] = args.html
    return written


def export_format(args: argparse.Namespace) -> str:
    """The format of ``-o``: ``--export``, else the one its suffix names (JSON by default)."""
    return args.export or EXPORT_SUFFIXES.get(Path(args.output).suffix.lower(), "json")


def requested(args: argparse.Namespace) -> dict[str, str]:
    """The outputs asked for, by option: what is written once a plan fits."""
    return {option: path for option, path in (("-o", args.output), ("--csv", args.csv),
                                              ("--plot", args.plot), ("--html", args.html))
            if path}


def check_outputs(args: argparse.Namespace, problems: list[Problem],
                  paths: list[str | None]) -> None:
    """Refuse, before solving, an output that could not be written: a folder, a missing or
    read-only folder, a suffix of no format (``-o`` without ``--export``, ``--csv``), a
    model export without its one model, a CSV that cannot hold the problem."""
    csv = [option for option, path in (("-o", args.output), ("--csv", args.csv)) if path
           and (option == "--csv" or export_format(args) == "csv")]
    if args.output:
        check_output(args.output, "-o", None if args.export else EXPORT_SUFFIXES)
    if args.csv:
        check_output(args.csv, "--csv", (".csv",))
    if args.output:
        fmt = export_format(args)
        model = Path(paths[0]) if paths[0] else api.default_model()
        if fmt in MODEL_EXPORTS and (len(paths) > 1 or model.suffix.lower() != f".{fmt}"):
            verb, kind = MODEL_EXPORTS[fmt]
            raise UsageError(f"--export {fmt} {verb} the model: give one {kind} model")
    for problem in problems if csv else ():
        reason = minimalloc_csv.csv_refusal(problem, planned=True)
        if reason is not None:
            raise UsageError(f"{' and '.join(csv)}: {reason}")

