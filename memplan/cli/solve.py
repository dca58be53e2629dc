"""``memplan solve``: plan a model, or several in one arena; write, print and prove the plan.

- the options steering the planners are built from `memplan.api.SolveOptions`
  and (a few) `memplan.solver.exact_options.ExactOptions`;
- every output is checked before the models are read (`memplan.cli.outputs`);
- `memplan.api.solve_report` (several models: `memplan.api.solve_models`) runs
  the heuristics then the exact planner, the live line on a terminal
  (`memplan.cli.progress`); Ctrl-C keeps the best plan;
- ``--prove`` runs the planned model in one arena: an ONNX model with
  onnxruntime, a ``.tflite`` in TFLite-Micro, a ``.pte`` in ExecuTorch;
- a ``.pte`` of several methods with a memory plan, and no ``--method``: every
  one is planned (the time limit shared) and ``-o`` writes them all into one
  program (`_run_methods`).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from memplan import api
from memplan.budget import command_left, command_pace
from memplan.cli.checks import UsageError, warn_beyond_limit
from memplan.cli.exit_codes import FAILED, INTERRUPTED, OK
from memplan.cli.models import all_model_options, load
from memplan.cli.outputs import (
    add_output_options,
    check_figures,
    check_outputs,
    export_format,
    requested,
    write_outputs,
)
from memplan.cli.parser import (
    MODEL_KINDS,
    SOLVE_RENAMED,
    Parents,
    add_dataclass_options,
    add_input_seed,
    changed,
    options_of,
)
from memplan.cli.summary import order_summary, print_rows, print_summary, solve_summary
from memplan.deploy.multimodel import MultiModel, flatten
from memplan.diagnosis.explain import capacity_line
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.shares import OUTPUT_CPU_PER_BUFFER
from memplan.solver.exact_options import ORDERS, ExactOptions

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
                          metavars={"planner": "NAME|all", "gap": "SHARE|BYTES"},
                          renamed=SOLVE_RENAMED)
    add_dataclass_options(solve.add_argument_group("exact planner options"), ExactOptions,
                          only=EXACT_FLAGS, choices={"strategy": ("lowest_offset", "none")},
                          metavars={"orders": f"{{{','.join(ORDERS)}}},..."})
    output = solve.add_argument_group("output options")
    add_output_options(output)
    output.add_argument("--quiet", action="store_true", help="print nothing (exit code only)")
    output.add_argument("--json", action="store_true", help="print the summary as JSON")
    output.add_argument("--prove", action="store_true", help="run the ONNX model in one arena "
                        "at the plan's offsets (a .tflite model: in TFLite-Micro with the plan "
                        "and with TFLM's own; an ExecuTorch .pte: in ExecuTorch's runtime with "
                        "the plan and with its own); exit 1 unless every output matches bit "
                        "for bit")
    add_input_seed(output)
    solve.set_defaults(run=run)


def _from_start(options: api.SolveOptions, buffers: int, outputs: int) -> api.SolveOptions:
    """``--time-limit`` bounds the command to its exit: the seconds since memplan began to
    load (imports, reading and checking the models) come off the solve's limit, and so
    does what writing ``outputs`` files of ``buffers`` buffers will take
    (`OUTPUT_CPU_PER_BUFFER`, on the clock at the command's pace so far: a quarter of a core
    beside busy processes makes it 4x longer); at least `COMMAND_LEAST_SHARE` stays. When
    the one pass every solve runs and its check (`CEILING_CPU_PER_BUFFER`) and the writing
    need more than the limit + `COMMAND_SLACK` after the reading, one line on stderr says
    so, with the time needed, before the planning starts (`warn_beyond_limit`)."""
    if options.time_limit is None:
        return options
    writing = outputs * buffers * OUTPUT_CPU_PER_BUFFER * command_pace()
    warn_beyond_limit("solve", buffers, options.time_limit,
                      "one pass, its check and the outputs", after=writing)
    return replace(options, time_limit=command_left(options.time_limit, writing))


def _model_names(paths: list[str], problems: list[Problem]) -> dict[str, Problem]:
    """Each model by a name for ``name/tensor`` ids: its problem's name, else its file's stem."""
    named: dict[str, Problem] = {}
    for path, problem in zip(paths, problems, strict=True):
        name = (problem.name or Path(path).stem).replace("/", "_")
        named[name if name not in named else f"{name}{len(named)}"] = problem
    return named


def run(args: argparse.Namespace) -> int:
    """``memplan solve``: check, read, plan, write, print; prove with ``--prove``."""
    exact_options = _exact_options(args)
    check_figures(args)
    paths = args.models or [None]
    _check_models(args, paths)
    methods = _every_method(args, paths)
    if methods:
        return _run_methods(args, Path(paths[0]), methods, exact_options)
    problems = [load(path, args, own_capacity=len(paths) == 1) for path in paths]
    check_outputs(args, problems, paths)
    solved = _solve(args, paths, problems, exact_options)
    one = (Path(paths[0]) if paths[0] else api.default_model()) if len(paths) == 1 else None
    reordering = getattr(args, "reordering", None)
    if one is not None and one.suffix.lower() == ".onnx":  # the plan file says how the model
        from memplan.onnx.prove import with_model_options  # became its problem (imports onnx)

        solved.plan = with_model_options(solved.plan, all_model_options(one, args))
    fitted = api.fits(solved.report.plan)  # a plan above the capacity is not written
    written = {} if not fitted else write_outputs(
        args, solved.problem, solved.plan, one, reordering,
        solved.report.heuristic if solved.multi is None else None)
    summary = _summary(args, solved, written, one)
    summary["not_written"] = {} if fitted else requested(args)
    interrupted = solved.report.interrupted  # Ctrl-C: the plan so far, no proof after it
    proof = _prove(args, solved, one) if args.prove and not interrupted else None
    if args.json:
        print(json.dumps({**summary, "proof": proof and proof.document}, indent=1))
    elif not args.quiet:
        print_summary(summary)
        if proof is not None:
            print(proof.text)
    if proof is not None and not proof.ok:
        return FAILED
    if interrupted:
        return INTERRUPTED  # the best plan so far printed, and written when it fits
    return OK if fitted else FAILED  # plans come validated


def _exact_options(args: argparse.Namespace) -> ExactOptions:
    """The exact planner's options given on the command line, refused before any work."""
    try:
        return ExactOptions.from_kwargs(
            **{name: getattr(args, name) for name in changed(args, ExactOptions, EXACT_FLAGS)})
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None


def _check_models(args: argparse.Namespace, paths: list[str | None]) -> None:
    """Refuse what several models cannot do (``--reorder``, ``--prove``) and several models
    without their sharing mode."""
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


@dataclass
class _Solved:
    """What the solve found."""

    name: str  # the model, or the models and their sharing mode, as the summary names them
    report: api.SolveReport
    multi: MultiModel | None  # several models: how they share the arena
    problem: Problem  # what was planned (several models: one problem of them all)
    plan: Plan


def _solve(args: argparse.Namespace, paths: list[str | None], problems: list[Problem],
           exact_options: ExactOptions, share: float = 1.0) -> _Solved:
    """Heuristics then the exact planner on the one model or on several in one arena, the
    live line on a terminal; Ctrl-C keeps the best plan. ``share``: of the time left."""
    from memplan.cli.progress import LiveLine, on_terminal

    options = _from_start(api.SolveOptions(**options_of(args, api.SolveOptions)),
                          sum(map(len, problems)), len(requested(args)))
    if options.time_limit is not None:
        options = replace(options, time_limit=options.time_limit * share)
    name = paths[0] if args.models else f"{api.default_model().name} (bundled)"
    with LiveLine(options.time_limit, enabled=not args.quiet and on_terminal()) as live:
        steps = dict(options=options, on_progress=live, stop=args.stop,
                     exact_options=exact_options)
        if len(problems) == 1:
            report = api.solve_report(problems[0], **steps)
            return _Solved(name, report, None, report.problem, report.plan)
        named = _model_names(paths, problems)
        capacity = getattr(args, "capacity", None)  # the shared arena's, not each model's
        multi, report = api.solve_models(named, args.mode, capacity=capacity, **steps)
    problem, plan = flatten(multi, report.plan)
    return _Solved(f"{' + '.join(named)} ({args.mode})", report, multi, problem, plan)


def _summary(args: argparse.Namespace, solved: _Solved, written: dict[str, str],
             one: Path | None) -> dict[str, Any]:
    """The summary, with the operator order, the reason a capacity is not met and a .pte
    program's own arena."""
    report = solved.report
    summary = solve_summary(solved.name, report, written, solved.multi)
    summary["order"] = order_summary(getattr(args, "reordering", None))
    summary["reason"] = capacity_line(report.problem, report.plan)
    if one is not None and one.suffix.lower() == ".pte":  # ExecuTorch's own arena beside
        from memplan.executorch.executorch_pte import pte_layout

        summary["program_plan"] = pte_layout(one, method=args.method).arena_size
    if summary["reason"] and solved.multi is None:
        summary["reason"] += f"; 'memplan explain {' '.join(args.models)}".rstrip() + \
            f" --capacity {report.problem.capacity}' names the tensors"
    return summary


class _Proven(NamedTuple):
    ok: bool  # every output matched bit for bit, the plan valid
    document: dict[str, Any]  # for --json
    text: str  # for the terminal


def _prove(args: argparse.Namespace, solved: _Solved, model: Path,
           program: bytes | None = None) -> _Proven:
    """``--prove``: the plan run in one arena, an ONNX model by onnxruntime, a ``.pte`` in
    ExecuTorch (beside its own plan; ``program``: the re-planned one to run, by default
    the plan written into the original), a ``.tflite`` in TFLite-Micro (beside TFLM's)."""
    plan_file = args.output or "the plan"
    if model.suffix.lower() == ".onnx":
        from memplan.onnx.prove import prove_plan

        reordering = getattr(args, "reordering", None)
        proof = prove_plan(model if reordering is None else reordering.model, solved.problem,
                           solved.plan, solved.plan.stats["model_options"],
                           seed=args.input_seed, plan_file=plan_file)
    elif model.suffix.lower() == ".pte":
        from memplan.executorch.executorch_runtime import prove_program

        proof = prove_program(model, solved.plan, method=args.method, seed=args.input_seed,
                              plan_file=plan_file, program=program)
    else:
        from memplan.tflite.tflm_arena import prove as prove_in_tflm

        tflm = prove_in_tflm(model, solved.problem, solved.plan, seed=args.input_seed,
                             bisect=False)
        return _Proven(tflm.ok, {"proven": tflm.ok, "report": str(tflm)}, str(tflm))
    return _Proven(proof.ok, proof.to_dict(), "\n".join(proof.lines()))


def _every_method(args: argparse.Namespace, paths: list[str | None]) -> list[str]:
    """The methods one run re-plans: for one ``.pte`` without ``--method``, every method
    with a memory plan when there are several; else none (one problem, as any model)."""
    if len(paths) != 1 or paths[0] is None or args.method is not None or \
            Path(paths[0]).suffix.lower() != ".pte":
        return []
    from memplan.executorch.executorch_pte import planned_methods, read_program

    methods = planned_methods(read_program(paths[0]))
    return methods if len(methods) > 1 else []


def _run_methods(args: argparse.Namespace, path: Path, methods: list[str],
                 exact_options: ExactOptions) -> int:
    """``solve`` of a ``.pte`` with several methods to plan: each planned in turn (its share
    of the time left), ``-o`` writes them all into one program (checked, read back);
    each method's summary and proof, then every arena before and after."""
    if args.csv or args.plot or args.html or (args.output and export_format(args) != "pte"):
        raise UsageError(f"{path}: methods {', '.join(methods)} have memory plans: -o "
                         f"PLANNED.pte writes them all re-planned; other outputs take one "
                         f"method (--method NAME)")
    each = {m: argparse.Namespace(**{**vars(args), "method": m}) for m in methods}
    problems = {m: load(str(path), each[m]) for m in methods}
    check_outputs(args, list(problems.values()), [str(path)])
    solved: dict[str, _Solved] = {}
    for k, method in enumerate(methods):
        solved[method] = _solve(each[method], [str(path)], [problems[method]], exact_options,
                                share=1 / (len(methods) - k))
        solved[method].name = f"{path} (method {method})"
        if solved[method].report.interrupted:
            break  # Ctrl-C: the methods planned so far, the others as they were
    interrupted = any(s.report.interrupted for s in solved.values())
    fitted = all(api.fits(s.report.plan) for s in solved.values())
    program, written = None, {}
    if (args.output and fitted) or (args.prove and not interrupted):
        from memplan.executorch.pte_program import planned_program_by_method, write_program

        program = planned_program_by_method(path, {m: (s.problem, s.plan)
                                                   for m, s in solved.items()})
    if args.output and fitted:
        write_program(args.output, program)
        written = {"output (pte)": args.output}
    summaries = {m: _summary(each[m], s, written, path) for m, s in solved.items()}
    proofs = {m: _prove(each[m], s, path, program) for m, s in solved.items()} \
        if args.prove and not interrupted else {}
    _print_methods(args, summaries, proofs, {} if fitted else requested(args))
    if not all(p.ok for p in proofs.values()):
        return FAILED
    return INTERRUPTED if interrupted else OK if fitted else FAILED


def _print_methods(args: argparse.Namespace, summaries: dict[str, dict[str, Any]],
                   proofs: dict[str, _Proven], not_written: dict[str, str]) -> None:
    """Each method's summary (and proof), then its arena before (the program's own plan)
    and after; ``--json``: one document of them."""
    if args.json:
        print(json.dumps({"methods": summaries, "not_written": not_written,
                          "proofs": {m: p.document for m, p in proofs.items()} or None},
                         indent=1))
        return
    if args.quiet:
        return
    for method, summary in summaries.items():
        print_summary({**summary, "not_written": not_written})
        if method in proofs:
            print(proofs[method].text)
        print()
    print_rows([(f"method {m}", f"{s['program_plan']:,} B -> {s['plan']['arena_size']:,} B "
                                f"(ExecuTorch's plan -> memplan's)")
                for m, s in summaries.items()])
