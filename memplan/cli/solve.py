"""``memplan solve``: plan a model, or several in one arena; write, print and prove the plan.

- the options steering the planners are built from `memplan.api.SolveOptions`
  and (a few) `memplan.solver.exact_options.ExactOptions`;
- every output is checked before the models are read (`memplan.cli.outputs`);
- `memplan.api.solve_report` (several models: `memplan.api.solve_models`) runs
  the heuristics then the exact planner, the live line on a terminal
  (`memplan.cli.progress`); Ctrl-C keeps the best plan;
- ``--prove`` runs the planned model in one arena: an ONNX model with
  onnxruntime, a ``.tflite`` in TFLite-Micro, a ``.pte`` in ExecuTorch.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from memplan import api, startup
from memplan.cli.checks import UsageError
from memplan.cli.exit_codes import FAILED, OK
from memplan.cli.models import all_model_options, load
from memplan.cli.outputs import add_output_options, check_figures, check_outputs, write_outputs
from memplan.cli.parser import MODEL_KINDS, Parents, add_dataclass_options, changed, options_of
from memplan.cli.summary import order_summary, print_summary, solve_summary
from memplan.deploy.multimodel import flatten
from memplan.diagnosis.explain import capacity_line
from memplan.problem import Problem
from memplan.solver.exact_options import ORDERS, ExactOptions

LEAST_SOLVE_SHARE = 0.1  # of --time-limit, what the solve keeps however long loading took
EXACT_FLAGS = ("deterministic", "strategy", "orders", "log")  # ExactOptions on the CLI


def add_command(sub, shared: Parents) -> None:
    """``memplan solve``: its models, sharing mode, planning, exact and output options."""
    solve = sub.add_parser("solve", parents=[shared.common, shared.model, shared.reordering,
                                             shared.capacity],
                           help="plan a model (or several in one arena): heuristics, then "
                                "the exact planner")
    solve.add_argument("models", nargs="*", metavar="MODEL",
                       help=f"{MODEL_KINDS} (default: a bundled model); several share one "
                            "arena")
    sharing = solve.add_argument_group("several models").add_mutually_exclusive_group()
    sharing.add_argument("--exclusive", dest="mode", action="store_const", const="exclusive",
                         help="the models never run at the same time: they reuse each "
                              "other's memory")
    sharing.add_argument("--concurrent", dest="mode", action="store_const", const="concurrent",
                         help="the models may run at the same time: each its own part")
    add_dataclass_options(solve.add_argument_group("planning options"), api.SolveOptions,
                          metavars={"heuristic": "NAME|all", "gap": "SHARE|BYTES"})
    add_dataclass_options(solve.add_argument_group("exact planner options"), ExactOptions,
                          only=EXACT_FLAGS, choices={"strategy": ("lowest_offset", "none")},
                          metavars={"orders": f"{{{','.join(ORDERS)}}},..."})
    output = solve.add_argument_group("output options")
    add_output_options(output)
    output.add_argument("--quiet", action="store_true", help="print nothing (exit code only)")
    output.add_argument("--json", action="store_true", help="print the summary as JSON")
    output.add_argument("--prove", action="store_true", help="run the ONNX model in one arena "
                        "at the plan's offsets (a .tflite model: in TFLite-Micro with the plan "
                        "and with TFLM's own); exit 1 unless every output matches bit for bit")
    solve.set_defaults(run=run)


def _from_start(options: api.SolveOptions) -> api.SolveOptions:
    """``--time-limit`` bounds the command up to its plan: the seconds since memplan began
    to load (imports, reading and checking the models) come off the solve's limit, of
    which at least `LEAST_SOLVE_SHARE` stays."""
    if options.time_limit is None:
        return options
    spent = time.perf_counter() - startup.STARTED
    return replace(options, time_limit=max(options.time_limit - spent,
                                           LEAST_SOLVE_SHARE * options.time_limit))


def _model_names(paths: list[str], problems: list[Problem]) -> dict[str, Problem]:
    """Each model by a name for ``name/tensor`` ids: its problem's name, else its file's stem."""
    named: dict[str, Problem] = {}
    for path, problem in zip(paths, problems, strict=True):
        name = (problem.name or Path(path).stem).replace("/", "_")
        named[name if name not in named else f"{name}{len(named)}"] = problem
    return named


def run(args: argparse.Namespace) -> int:
    """``memplan solve``: read, plan, write, print; prove with ``--prove``."""
    from memplan.cli.progress import LiveLine, on_terminal, stop_on_ctrl_c

    try:  # refuse bad values before any work
        exact_options = ExactOptions.from_kwargs(
            **{name: getattr(args, name) for name in changed(args, ExactOptions, EXACT_FLAGS)})
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
    check_figures(args)
    paths = args.models or [None]
    if len(paths) > 1 and args.reorder:
        raise UsageError("--reorder: give one ONNX model")
    if args.prove and (len(paths) > 1 or not str(paths[0] or ".onnx").lower().endswith(
            (".onnx", ".tflite", ".pte"))):
        raise UsageError("--prove runs one ONNX model in the plan's arena, one TFLite "
                         "model in TFLite-Micro, or one .pte in ExecuTorch: give one .onnx, "
                         ".tflite or .pte")
    if len(paths) > 1 and args.mode is None:
        raise UsageError("several models share one arena: say --exclusive (they never run "
                         "at the same time) or --concurrent (they may)")
    problems = [load(path, args, own_capacity=len(paths) == 1) for path in paths]
    check_outputs(args, problems, paths)
    model = paths[0] if args.models else f"{api.default_model().name} (bundled)"
    options = _from_start(api.SolveOptions(**options_of(args, api.SolveOptions)))
    live = LiveLine(options.time_limit, enabled=not args.quiet and on_terminal())
    multi = None
    with live, stop_on_ctrl_c() as stop:
        steps = dict(options=options, on_progress=live, stop=stop, exact_options=exact_options)
        if len(problems) == 1:
            report = api.solve_report(problems[0], **steps)
        else:
            capacity = getattr(args, "capacity", None)  # the shared arena's, not each model's
            named = _model_names(paths, problems)
            multi, report = api.solve_models(named, args.mode, capacity=capacity, **steps)
            model = f"{' + '.join(named)} ({args.mode})"
    problem, plan = (report.problem, report.plan) if multi is None else \
        flatten(multi, report.plan)
    single = Path(paths[0]) if paths[0] else api.default_model()
    reordering = getattr(args, "reordering", None)
    onnx_model = single if len(paths) == 1 and single.suffix.lower() == ".onnx" else None
    if onnx_model is not None:  # a plan file says how the model became its problem
        from memplan.proofs.prove import prove_plan, with_model_options  # imports onnx

        plan = with_model_options(plan, all_model_options(onnx_model, args))
    written = write_outputs(args, problem, plan, single if len(paths) == 1 else None,
                            None if reordering is None else reordering.model,
                            report.heuristic if multi is None else None)
    summary = solve_summary(model, report, written, multi)
    summary["order"] = order_summary(reordering)
    summary["reason"] = capacity_line(report.problem, report.plan)
    if len(paths) == 1 and single.suffix.lower() == ".pte":  # ExecuTorch's own arena beside
        from memplan.frontends.executorch_pte import pte_layout

        summary["program_plan"] = pte_layout(single).arena_size
    if summary["reason"] and multi is None:
        summary["reason"] += f"; 'memplan explain {' '.join(args.models)}".rstrip() + \
            f" --capacity {report.problem.capacity}' names the tensors"
    proof = tflm = None
    if args.prove and onnx_model is not None:
        proof = prove_plan(onnx_model if reordering is None else reordering.model, problem, plan,
                           plan.stats["model_options"], plan_file=args.output or "the plan")
    elif args.prove and single.suffix.lower() == ".pte":  # both programs in ExecuTorch
        from memplan.proofs.executorch_runtime import prove_program

        proof = prove_program(single, plan, seed=args.seed or 0,
                              plan_file=args.output or "the plan")
    elif args.prove:  # one .tflite model: the proof inside TFLite-Micro
        from memplan.proofs.tflm_arena import prove as prove_in_tflm

        tflm = prove_in_tflm(single, problem, plan, seed=args.seed or 0, bisect=False)
    if args.json:
        proven = proof.to_dict() if proof else tflm and {"proven": tflm.ok, "report": str(tflm)}
        print(json.dumps({**summary, "proof": proven}, indent=1))
    elif not args.quiet:
        print_summary(summary)
        if proof is not None or tflm is not None:
            print("\n".join(proof.lines()) if proof else tflm)
    if (proof is not None and not proof.ok) or (tflm is not None and not tflm.ok):
        return FAILED
    return OK if api.fits(report.plan) else FAILED  # plans come validated

