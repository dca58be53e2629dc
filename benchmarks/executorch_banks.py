"""ExecuTorch's BankedGreedy against memplan on a fast and a slow bank, run for real.

For each model of `benchmarks.executorch_models` and of
`benchmarks.executorch_transformers` (``hf ...``: ten architectures from the
``transformers`` library, random weights): export it and lower it with
memplan's single-arena pass, whose algorithm (`Measuring`), handed the graph's
specs, first plans one arena (the optimum the fast banks are sized from), then
for each fast bank (25, 50 and 75 % of that optimum; 64 KiB, 256 KiB and 1 MiB
of TCM or SRAM) beside a slow bank that holds the single-arena optimum (a device
whose external memory fits the model's best single plan), three planners on
the same specs: ExecuTorch's ``BankedGreedy`` (its slow arena measured with an
unbounded slow bank: it fills the fast bank first, the slow bank's size never
changes its choices), memplan's default objective (``traffic``) and memplan's
``slow_arena``. Each row: the slow arena, the bytes in the slow bank, those
bytes times their reads (`memplan.executorch.target_regions.spec_reads`), whether the
plan fits the slow bank, seconds, and memplan's proven gap on its objective.

Runtime: the model lowered with BankedGreedy's pass and with memplan's (each
objective) at ``--runtime`` banks (``all``, the default; ``mid``: the 50 % one;
``none``), run in ExecuTorch's runtime: memplan's outputs bit-identical to
BankedGreedy's, BankedGreedy's to the single-arena greedy program's
(`benchmarks.executorch_models.runtime_verdict`). At those banks the export is
timed: ``to_executorch`` with memplan's default pass for each objective, right
after BankedGreedy's (alternating, ``--rounds`` times, medians kept), on the wall
clock and in the process's CPU seconds (a shared machine's load stretches the
wall clock of both)::

    python -m benchmarks executorch-banks                 # every model
    python -m benchmarks executorch-banks llama --runtime mid
    python -m benchmarks executorch-banks --runtime mid --rounds 3
    python -m benchmarks executorch-banks --time-limit 20
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from dataclasses import dataclass

from benchmarks import executorch_models, executorch_transformers
from benchmarks.executorch_models import (
    TIME_LIMIT,
    eager,
    export,
    lower,
    run,
    runtime_verdict,
)

KIB = 1024
PARTS = (("25 %", 0.25), ("50 %", 0.50), ("75 %", 0.75),
         ("64 KiB", 64 * KIB), ("256 KiB", 256 * KIB), ("1 MiB", 1024 * KIB))
PLANNERS = ("BankedGreedy", "memplan traffic", "memplan slow_arena")
MODELS = {**executorch_models.MODELS, **executorch_transformers.MODELS}
UNBOUNDED = 1 << 40


@dataclass
class Row:
    model: str
    bank: str  # the fast bank's name: "25 %", "64 KiB"...
    fast: int
    slow: int  # the slow bank: the single-arena optimum
    planner: str
    slow_arena: int | None  # None: no plan
    slow_bytes: int | None
    traffic: int | None
    fits: bool
    gap: float | None  # memplan's proven gap on its objective
    seconds: float
    runtime: str = "not run"
    export: float | None = None  # seconds of to_executorch with this planner's pass
    greedy_export: float | None = None  # BankedGreedy's, lowered just before it
    export_cpu: float | None = None  # the same two in CPU seconds of the process
    greedy_export_cpu: float | None = None


class Measuring:
    """memplan's single-arena algorithm that, on each graph it plans, first measures every
    fast bank and planner on the very specs it was handed (restored after each)."""

    def __init__(self, single, time_limit: float):
        self.single, self.time_limit, self.rows = single, time_limit, []
        self.__name__ = single.__name__

    def __call__(self, alignment, specs, graph_module, signature=None, padding=0):
        from executorch.exir.banked_memory_planning import Bank, TargetMemoryMap

        specs = list(specs)
        saved = {s: (s.mem_id, s.mem_offset, s.mem_obj_id) for s in specs}
        self.rows, self.targets = [], {}
        result = self.single(alignment, specs, graph_module, signature, padding)
        optimum = result.bufsizes[1]
        for bank, size in PARTS:
            fast = int(optimum * size) // 16 * 16 if isinstance(size, float) else size
            target = TargetMemoryMap([Bank("fast", fast, 1), Bank("slow", optimum, 2)])
            self.targets[bank] = target
            for planner in PLANNERS:
                found = measure((alignment, specs, graph_module, signature, padding), target,
                                planner, self.time_limit, optimum)
                self.rows.append((bank, fast, optimum, planner, *found))
                for spec, (mem_id, offset, obj) in saved.items():
                    spec.mem_id, spec.mem_offset, spec.mem_obj_id = mem_id, offset, obj
                    spec.realign(alignment)
        return result


def measure(call, target, planner: str, time_limit: float, slow: int):
    """One planner on the call's specs: (slow arena, slow bytes, traffic, fits, gap,
    seconds); BankedGreedy with an unbounded slow bank, whether it fits read off it."""
    import numpy as np
    from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap

    import memplan.executorch
    from memplan.executorch.target_regions import RegionOverflowError, spec_reads

    alignment, specs, graph_module, signature, padding = call
    began = time.perf_counter()
    if planner == "BankedGreedy":
        unbounded = TargetMemoryMap([target.banks[0], Bank("slow", UNBOUNDED, 2)])
        result = BankedGreedy(unbounded)(alignment, specs, graph_module, signature, padding)
        seconds = time.perf_counter() - began
        roots = [s for s, r in result.spec_dict.items()
                 if r.mem_id == 2 and s.storage_base is None and s.allocated_memory]
        reads = np.maximum(spec_reads(graph_module, roots), 1)
        sizes = np.array([s.allocated_memory for s in roots], np.int64)
        arena = result.bufsizes[2]
        return arena, int(sizes.sum()), int((sizes * reads).sum()), arena <= slow, None, \
            seconds
    algorithm = memplan.executorch.algorithm(time_limit, regions=target, verify=False,
                                             objective=planner.split()[1])
    try:
        algorithm(alignment, specs, graph_module, signature, padding)
    except RegionOverflowError:
        return None, None, None, False, None, time.perf_counter() - began
    report = algorithm.reports[-1]
    return report.slow_arena, report.slow_bytes, report.traffic, True, report.objective_gap, \
        report.seconds


def timed(edge, planning_pass) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of the process, the program or the error) of one
    ``to_executorch`` with ``planning_pass``, from a collected heap: a collection the
    previous lowering left due is not charged to this one (without it, one export in five
    took 0.3-0.6 s more, on either side)."""
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    try:
        program = lower(edge, planning_pass)
    except Exception as error:  # noqa: BLE001 (BankedGreedy's BankPlacementError, memplan's)
        program = error
    return time.perf_counter() - began, time.process_time() - cpu, program


def runtime(model, edge, target, time_limit: float, reference: list, rounds: int = 1
            ) -> tuple[dict[str, str], dict[str, tuple[float, float, float, float]]]:
    """Each planner's program at ``target`` run in ExecuTorch's runtime: BankedGreedy's
    against ``reference`` (the single-arena greedy program's outputs), memplan's against
    BankedGreedy's bit for bit (against ``reference`` where BankedGreedy's does not
    lower); every one close to eager PyTorch. Also, per memplan objective, the seconds of
    ``to_executorch`` with memplan's default pass and with BankedGreedy's, lowered just
    before it in the same process (alternating, so both see the same load), ``rounds``
    times: the medians of (memplan wall, BankedGreedy wall, memplan CPU, BankedGreedy
    CPU) over the rounds, the CPU of the whole process (CP-SAT's threads too)."""
    from executorch.exir.banked_memory_planning import banked_memory_planning_pass

    import memplan.executorch

    verdicts, peer, exports = {}, reference, {}
    wanted = eager(model)
    for planner in PLANNERS:
        if planner == "BankedGreedy":
            program = timed(edge, banked_memory_planning_pass(target))[2]
        else:
            times = []
            for _ in range(rounds):
                greedy = timed(edge, banked_memory_planning_pass(target))
                mine = timed(edge, memplan.executorch.memory_planning_pass(
                    time_limit=time_limit, regions=target, objective=planner.split()[1]))
                times.append((mine[0], greedy[0], mine[1], greedy[1]))
            program = mine[2]
            exports[planner] = tuple(statistics.median(t[k] for t in times) for k in range(4))
        if isinstance(program, Exception):
            verdicts[planner] = f"not lowered: {type(program).__name__}"
            continue
        outputs = run(program, model.calls)
        verdicts[planner] = runtime_verdict(peer, outputs, wanted).replace(
            "greedy", "single-arena greedy" if peer is reference else "BankedGreedy")
        if planner == "BankedGreedy":
            peer = outputs
    return verdicts, exports


def measure_model(name: str, time_limit: float, runtime_at: str, rounds: int = 1
                  ) -> list[Row]:
    """Every row of one model: measured inside memplan's single-arena pass, then run."""
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite

    import memplan.executorch

    build, xnnpack = MODELS[name]
    model = build()
    edge = export(model, xnnpack=xnnpack)
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=time_limit)
    measuring = Measuring(planning_pass.algorithm, time_limit)
    planning_pass.memory_planning_algo = MemoryPlanningAlgorithmSuite([measuring])
    lower(edge, planning_pass)
    reference = run(lower(edge), model.calls)
    rows = [Row(name, *found) for found in measuring.rows]
    for bank, target in measuring.targets.items():
        if runtime_at == "all" or (runtime_at == "mid" and bank == "50 %"):
            verdicts, exports = runtime(model, edge, target, time_limit, reference, rounds)
            for row in rows:
                if row.bank == bank:
                    row.runtime = verdicts[row.planner]
                    row.export, row.greedy_export, row.export_cpu, row.greedy_export_cpu = \
                        exports.get(row.planner, (None,) * 4)
    for row in rows:
        print(row, file=sys.stderr, flush=True)
    return rows


def _bytes(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def table(rows: list[Row]) -> str:
    lines = ["| model | fast bank | planner | slow arena | slow bytes | bytes x reads | "
             "fits | proven gap | seconds | export s (BankedGreedy's) | runtime |",
             "|---" * 11 + "|"]
    for r in rows:
        gap = "-" if r.gap is None else "optimal" if r.gap == 0 else f"{r.gap:.1%}"
        export = "-" if r.export is None else f"{r.export:.2f} ({r.greedy_export:.2f})"
        lines.append(f"| {r.model} | {r.bank} ({r.fast:,}) | {r.planner} | "
                     f"{_bytes(r.slow_arena)} | {_bytes(r.slow_bytes)} | {_bytes(r.traffic)} | "
                     f"{'yes' if r.fits else 'no'} | {gap} | {r.seconds:.2f} | {export} | "
                     f"{r.runtime} |")
    return "\n".join(lines)


def _ratios(rows: list[Row], planner: str, model: str | None = None) -> dict[str, list]:
    """Per clock (``wall``, ``CPU``), the sorted ratios of ``planner``'s export seconds to
    BankedGreedy's at the timed banks (where BankedGreedy's plan fits the slow bank)."""
    greedy = {(r.model, r.bank): r.fits for r in rows if r.planner == "BankedGreedy"}
    timed = [r for r in rows if r.planner == planner and r.export is not None
             and greedy[(r.model, r.bank)] and model in (None, r.model)]
    return {"wall": sorted(r.export / r.greedy_export for r in timed),
            "CPU": sorted(r.export_cpu / r.greedy_export_cpu for r in timed)}


def _spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f} / {ratios[-1]:.2f}" if ratios else "-"


def summary(rows: list[Row]) -> list[str]:
    """Per memplan objective: at how many banks its plan is proven within 1 % (of those
    it plans), and the median and largest ratio of its export seconds to BankedGreedy's
    (`_ratios`), on the wall clock and in CPU seconds."""
    lines = []
    for planner in PLANNERS[1:]:
        mine = [r for r in rows if r.planner == planner]
        proven = sum(r.fits and r.gap is not None and r.gap <= 0.01 for r in mine)
        ratios = _ratios(rows, planner)
        shown = "".join(f"; export / BankedGreedy's ({clock}): median / largest "
                        f"{_spread(found)} over {len(found)} banks"
                        for clock, found in ratios.items() if found)
        lines.append(f"{planner}: proven within 1 % at {proven} of {len(mine)} banks{shown}")
    return lines


def export_table(rows: list[Row]) -> str:
    """Per model and memplan objective, the median / largest ratio of the export seconds
    to BankedGreedy's over the timed banks, wall clock and CPU."""
    lines = ["| model | objective | banks | wall: median / largest | CPU: median / largest |",
             "|---" * 5 + "|"]
    for model in dict.fromkeys(r.model for r in rows):
        for planner in PLANNERS[1:]:
            ratios = _ratios(rows, planner, model)
            if ratios["wall"]:
                lines.append(f"| {model} | {planner.split()[1]} | {len(ratios['wall'])} | "
                             f"{_spread(ratios['wall'])} | {_spread(ratios['CPU'])} |")
    return "\n".join(lines)


def _pair(greedy: Row, mine: Row, field: str) -> str:
    """BankedGreedy's value (``over`` when its slow arena exceeds the slow bank) / memplan's
    (its proven gap), or that memplan proved no plan fits."""
    theirs = f"{getattr(greedy, field):,}" + ("" if greedy.fits else " over")
    gap = "-" if mine.gap is None else "opt" if mine.gap == 0 else f"{mine.gap:.1%}"
    return f"{theirs} / " + (f"{getattr(mine, field):,} ({gap})" if mine.fits else "no fit")


def compact(rows: list[Row]) -> str:
    """The results page's table: per model a row of the three shares of the optimum and
    one of the three parts' sizes, each bank with the slow arena (BankedGreedy /
    ``slow_arena``) and the bytes x reads (BankedGreedy / ``traffic``), then the
    runtime's verdicts (of the programs that lower: BankedGreedy's fails where over)."""
    by_key = {(r.model, r.bank, r.planner): r for r in rows}
    lines = ["| model | " + "fast bank | slow arena | bytes x reads | " * 3 + "runtime |",
             "|---" * 11 + "|"]
    for model in dict.fromkeys(r.model for r in rows):
        for banks in (PARTS[:3], PARTS[3:]):
            cells, seen = [], set()
            for bank, _ in banks:
                greedy = by_key[(model, bank, "BankedGreedy")]
                cells += [f"{bank} ({greedy.fast:,})",
                          _pair(greedy, by_key[(model, bank, "memplan slow_arena")],
                                "slow_arena"),
                          _pair(greedy, by_key[(model, bank, "memplan traffic")], "traffic")]
                seen |= {by_key[(model, bank, p)].runtime for p in PLANNERS
                         if p != "BankedGreedy" or greedy.fits}
            lines.append(f"| {model} | {' | '.join(cells)} | {', '.join(sorted(seen))} |")
    return "\n".join(lines)


def verdicts(rows: list[Row]) -> list[str]:
    """The targets, checked: memplan fits wherever BankedGreedy fits, and there each of
    its objectives has at most BankedGreedy's slow arena and slow bytes (``traffic`` its
    bytes x reads too)."""
    found = []
    by_key = {(r.model, r.bank, r.planner): r for r in rows}
    for r in rows:
        if r.planner != "BankedGreedy" or not r.fits:
            continue
        for planner, fields in (("memplan traffic", ("slow_arena", "slow_bytes", "traffic")),
                                ("memplan slow_arena", ("slow_arena", "slow_bytes"))):
            mine = by_key[(r.model, r.bank, planner)]
            if not mine.fits:
                found.append(f"target missed: {r.model} at {r.bank}: {planner} found no plan")
            found += [f"target missed: {r.model} at {r.bank}: {planner} {field} "
                      f"{getattr(mine, field):,} > BankedGreedy's {getattr(r, field):,}"
                      for field in fields if mine.fits and getattr(mine, field) > getattr(r, field)]
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks executorch-banks",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="names containing these (default: all)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT,
                        help="seconds per graph for memplan")
    parser.add_argument("--runtime", choices=("all", "mid", "none"), default="all",
                        help="fast banks whose programs run in ExecuTorch's runtime (and "
                             "whose exports are timed)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="exports timed per bank and objective, alternating with "
                             "BankedGreedy's (the medians are kept)")
    args = parser.parse_args(argv)
    chosen = [n for n in MODELS if not args.models or any(a in n for a in args.models)]
    rows = []
    for name in chosen:
        began = time.perf_counter()
        rows += measure_model(name, args.time_limit, args.runtime, args.rounds)
        print(f"{name}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    print(table(rows))
    print()
    print(compact(rows))
    print()
    print(export_table(rows))
    found = verdicts(rows)
    for line in summary(rows) + found:
        print(line)
    bad = [r for r in rows if r.runtime not in ("identical", "not run")
           and not r.runtime.startswith("not lowered")]
    return 1 if bad or any(line.startswith("target") for line in found) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
