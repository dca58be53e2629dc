"""``python -m benchmarks``: run suites, list them, describe the machine.

    python -m benchmarks run --suite minimalloc --planner all --mode fit,minimise \\
        --time-limit 60 --repeat 3 --out benchmarks/results/minimalloc --section minimalloc
    python -m benchmarks list
    python -m benchmarks regenerate --section minimalloc   # rerun a section's own command
    python -m benchmarks machine --section machine
    python -m benchmarks peers --problem A,J --minimalloc PATH --repeat 3  # side by side
    python -m benchmarks regress --class tilings   # against benchmarks/baseline.json
    python -m benchmarks onnx-scale --sizes 0.1,0.5,2,8   # memory of solve on large models
    python -m benchmarks onnx-architectures   # GPT-2, BERT, ViT, ... exported from torch
    python -m benchmarks onnx-transformers   # transformers' models, both exporters, proven
    python -m benchmarks onnx-reading   # reading hostile ONNX files, beside onnx.load
    python -m benchmarks tvm llama vit   # Relax's planner against memplan's, in TVM's VM
    python -m benchmarks tvm-storages bert   # shared storages for Vulkan and WebGPU targets
    python -m benchmarks executorch-banks llama   # BankedGreedy and memplan, fast/slow banks
    python -m benchmarks load --problem F,I   # quiet and with busy processes beside
    python -m benchmarks fuzz --minutes 10   # seeded mutations of real files, every reader

``run`` writes ``raw.jsonl`` (every run), ``results.csv`` and ``results.md``
(medians) to ``--out`` and prints the table; with ``--section NAME`` it also
replaces that generated section of BENCHMARKS.md (see `benchmarks.report`).
It exits with 2 when any plan was invalid or beat the lower bound.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
from pathlib import Path

from benchmarks import report
from benchmarks.runner import Settings, is_alarming, run_all, summarise
from benchmarks.suites import MODES, SUITES, cases
from benchmarks.worker import import_plugins

# Commands whose module parses its own options: peak memory of planning ONNX models of
# 0.1-8 GB, architectures exported from torch, TVM, ExecuTorch's fast and slow banks.
OWN_OPTIONS = {"onnx-scale": "onnx_scale", "onnx-architectures": "onnx_architectures",
               "onnx-transformers": "onnx_transformers", "onnx-reading": "onnx_reading",
               "tvm": "tvm_models", "tvm-storages": "tvm_storages",
               "executorch-banks": "executorch_banks", "load": "load", "fuzz": "fuzz"}


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run planners on suites, write the tables")
    run.add_argument("--suite", type=_names, required=True,
                     help=f"comma-separated: {', '.join(SUITES)}")
    run.add_argument("--problem", type=_names, default=(),
                     help="only these problems of the suites (comma-separated; default all)")
    run.add_argument("--planner", default="all",
                     help="comma-separated names; all; all,-exact (all but exact)")
    run.add_argument("--time-limit", type=float, help="seconds, passed to every planner")
    run.add_argument("--repeat", type=int, default=1, help="runs per row; tables give medians")
    run.add_argument("--mode", type=_names, default=("fit",),
                     help="fit (keep the capacity), minimise (drop it), or fit,minimise")
    run.add_argument("--seed", type=int, default=0, help="passed to every planner")
    run.add_argument("--option", type=_option, action="append", default=[],
                     help="planner option key=value (JSON value), e.g. threads=1; repeatable")
    run.add_argument("--hard-timeout", type=float,
                     help="kill a run after this many seconds (default 3 x limit + 60, or 600)")
    run.add_argument("--import", dest="imports", action="append", default=[],
                     help="module or .py file to import first (it may register planners)")
    run.add_argument("--jobs", type=int, default=1, help="runs at once (default 1: timings)")
    run.add_argument("--out", type=Path, default=Path("benchmarks/results/latest"),
                     help="folder for raw.jsonl, results.csv, results.md")
    run.add_argument("--section", help="also replace this generated section of the doc")
    run.add_argument("--doc", type=Path, default=report.DOC, help="default: BENCHMARKS.md")
    peers = commands.add_parser("peers", help="memplan side by side with other planners, "
                                              "whole processes (see benchmarks.peers)")
    peers.add_argument("--suite", default="minimalloc", help="a suite (default minimalloc)")
    peers.add_argument("--problem", type=_names, default=(), help="only these problems")
    peers.add_argument("--variant", type=_names, default=("original",),
                       help="original, reversed (time mirrored), relabelled (rows shuffled)")
    peers.add_argument("--peer", type=_names, default=("memplan", "minimalloc", "supermalloc",
                                                       "tabu"),
                       help="memplan, minimalloc, supermalloc, tabu (default: all)")
    peers.add_argument("--mode", choices=MODES, default="fit")
    peers.add_argument("--time-limit", type=float, default=60.0, help="seconds for every peer")
    peers.add_argument("--repeat", type=int, default=3, help="runs per peer; medians")
    peers.add_argument("--omnimalloc-time-limit", type=float,
                       help="seconds for SuperMalloc and tabu (default: --time-limit)")
    peers.add_argument("--minimalloc", help="MiniMalloc's binary (default: "
                                            "$MEMPLAN_MINIMALLOC)")
    peers.add_argument("--out", type=Path, default=Path("benchmarks/results/peers"))
    peers.add_argument("--section", help="also replace this generated section of the doc")
    peers.add_argument("--doc", type=Path, default=report.DOC)
    regress = commands.add_parser("regress", help="every class against the stored baseline; "
                                                  "exit 1 when a row got worse "
                                                  "(see benchmarks.regress)")
    regress.add_argument("--class", dest="klass", type=_names, default=(),
                         help="comma-separated classes (default all; see benchmarks.regress)")
    regress.add_argument("--problem", type=_names, default=(), help="only these problems")
    regress.add_argument("--baseline", type=Path, default=None,
                         help="default: benchmarks/baseline.json")
    regress.add_argument("--retries", type=int, default=2, help="runs again of a failing row")
    regress.add_argument("--tolerance", type=float, default=0.25,
                         help="how much a time ratio may grow (0.25: 25 %%)")
    regress.add_argument("--write-baseline", action="store_true",
                         help="measure and store the rows as the new baseline")
    regress.add_argument("--only-new", action="store_true",
                         help="only the rows that the baseline does not have")
    listing = commands.add_parser("list", help="the suites, their problems, the planners")
    listing.add_argument("--suite", type=_names, default=tuple(SUITES))
    again = commands.add_parser("regenerate", help="rerun the commands behind the doc's "
                                                   "generated sections")
    again.add_argument("--section", type=_names, default=(),
                       help="only these sections (comma-separated; default all)")
    again.add_argument("--doc", type=Path, default=report.DOC)
    for name, module in OWN_OPTIONS.items():
        commands.add_parser(name, add_help=False,
                            help=f"see benchmarks.{module} (--help lists its options)")
    info = commands.add_parser("machine", help="cores, memory, CPU and versions")
    info.add_argument("--section", help="also write it as this section of the doc")
    info.add_argument("--doc", type=Path, default=report.DOC)
    return parser


def _planners(text: str) -> tuple[str, ...]:
    """``a,b``, ``all``, or ``all,-exact`` (all but some); unknown names fail, listing all.

    Excluding a planner that is not registered is no error (``all,-exact``
    works before the exact planner exists).
    """
    from memplan.registry import get_planner, planners

    names = _names(text)
    for name in names:
        if name != "all" and not name.startswith("-"):
            get_planner(name)
    chosen = [n for n in names if n != "all" and not n.startswith("-")]
    if "all" in names:
        chosen += [n for n in planners() if n not in chosen]
    return tuple(n for n in chosen if f"-{n}" not in names)


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    bad = [m for m in args.mode if m not in MODES]
    if bad:
        sys.exit(f"unknown mode {bad[0]!r}; valid modes: {', '.join(MODES)}")
    imports = tuple(str(Path(name).resolve()) if name.endswith(".py") else name
                    for name in args.imports)  # the workers run in the repository
    import_plugins(imports)
    settings = Settings(suites=args.suite, planners=_planners(args.planner),
                        problems=args.problem, modes=args.mode,
                        time_limit=args.time_limit, repeat=args.repeat, seed=args.seed,
                        options=dict(args.option), hard_timeout=args.hard_timeout,
                        jobs=args.jobs, imports=imports)
    if not settings.planners:
        sys.exit("no planner is registered yet")
    info = report.machine()  # the load average before the run
    results = run_all(settings, args.out, progress=lambda line: print(line, file=sys.stderr))
    rows = summarise(results)
    table = report.markdown(rows)
    report.write_csv(args.out / "results.csv", rows)
    (args.out / "results.md").write_text(table)
    print(table)
    if args.section:
        command = "python -m benchmarks " + shlex.join(argv)
        report.update_section(args.doc, args.section,
                              report.section_text(command, rows, info, args.repeat), command)
        report.update_section(args.doc, "machine", report.machine_markdown(info),
                              "python -m benchmarks machine --section machine")
    alarming = [row for row in rows if is_alarming(row)]
    for row in alarming:
        print(f"!!! {row['problem']} / {row['planner']}: {row['status']}: {row['note']}",
              file=sys.stderr)
    return 2 if alarming else 0


def _regenerate(doc: Path, sections: tuple[str, ...]) -> int:
    """Rerun each generated section's own command (the doc records it in its marker)."""
    found = report.commands(doc)
    unknown = sorted(set(sections) - set(found))
    if unknown:
        sys.exit(f"error: no generated section {unknown[0]!r} in {doc}; "
                 f"sections: {', '.join(found)}")
    worst = 0
    for name, command in found.items():
        if name == "machine" or (sections and name not in sections):
            continue  # every run refreshes the machine section itself
        print(f"== {name}: {command}", file=sys.stderr)
        worst = max(worst, main(shlex.split(command)[3:]))  # drop "python -m benchmarks"
    return worst


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in OWN_OPTIONS:  # a module that parses its own options
        module = importlib.import_module(f"benchmarks.{OWN_OPTIONS[argv[0]]}")
        return module.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "run":
        try:
            return _run(args, argv)
        except (KeyError, FileNotFoundError) as error:  # unknown suite, problem or planner
            sys.exit(f"error: {error.args[0]}")
    if args.command == "peers":
        from benchmarks import peers

        unknown = sorted(set(args.peer) - set(peers.PEERS)) + sorted(
            set(args.variant) - set(peers.VARIANTS))
        if unknown:
            sys.exit(f"error: unknown peer or variant {unknown[0]!r}; peers: "
                     f"{', '.join(peers.PEERS)}; variants: {', '.join(peers.VARIANTS)}")
        args.argv = argv
        return peers.main(args)
    if args.command == "regress":
        from benchmarks import regress

        args.baseline = args.baseline or regress.BASELINE
        return regress.main(args)
    if args.command == "list":
        from memplan.registry import planners

        for suite in args.suite:
            print(f"{suite}: {', '.join(case.name for case in cases(suite))}")
        print(f"planners: {', '.join(planners()) or '(none registered yet)'}")
        return 0
    if args.command == "regenerate":
        return _regenerate(args.doc, args.section)
    info = report.machine()
    print(report.machine_markdown(info), end="")
    if args.section:
        report.update_section(args.doc, args.section, report.machine_markdown(info),
                              "python -m benchmarks machine --section machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
