"""``python -m benchmarks.deploy``: scratch buffers and two memory regions on real models.

What a microcontroller deployment of a light ONNX model asks of the
planners: every operator also wants workspace (generated here, seeded), and
the memory is a small fast SRAM plus a large slow DRAM. For each model the
script reports what the heuristics and the exact planners reach:

- *scratch* (one arena): the post-pass heuristic (`memplan.deploy.scratch`) against
  the lexicographic exact planner (`memplan.deploy.scratch_exact`): peak, then the
  variable scratch granted (and, for the exact planner, the most that any
  plan at that peak could grant; -1 when not computed);
- *regions* (SRAM + DRAM, scratch included): the fill-SRAM-first heuristic
  (`memplan.deploy.regions`) against the exact region choice
  (`memplan.deploy.regions_exact`): bytes in DRAM (the cost), SRAM and DRAM tops,
  granted scratch.

Every plan goes through the validator. Generated scratch, per operator step
``t`` with probability ``0.6``: relative to the largest tensor the step writes,
a fixed buffer of 5-30 % or a variable one of 5-20 % minimum and 50-150 %
maximum, rounded up to 16 bytes.

    python -m benchmarks.deploy --models squeezenet,bvlc_alexnet,resnet50 \\
        --sram-kib 256 --time-limit 60 [--busy 3]
"""

from __future__ import annotations

import argparse
import random
import time

from benchmarks.load import busy, load_average
from benchmarks.suites import onnx_light_dir
from memplan.deploy.regions import plan_regions
from memplan.deploy.regions_exact import plan_regions_exact
from memplan.deploy.scratch import plan_scratch
from memplan.deploy.scratch_exact import plan_scratch_exact
from memplan.onnx.onnx import from_onnx
from memplan.problem import Buffer, Problem, Region
from memplan.validate import check

_ROUND = 16  # bytes: scratch sizes are multiples of this


def _rounded(size: float) -> int:
    return max(_ROUND, -(-int(size) // _ROUND) * _ROUND)


def with_scratch(problem: Problem, seed: int = 0, share: float = 0.6) -> Problem:
    """``problem`` plus generated scratch buffers (see the module doc); seeded."""
    rng = random.Random(seed)
    written: dict[int, int] = {}
    for start, size in zip(problem.starts.tolist(), problem.sizes.tolist(), strict=True):
        written[start] = max(written.get(start, 0), size)
    scratch = []
    for step in sorted(written):
        if rng.random() >= share:
            continue
        base = written[step]
        if rng.random() < 0.5:
            size, max_size = _rounded(base * rng.uniform(0.05, 0.3)), None
        else:
            size = _rounded(base * rng.uniform(0.05, 0.2))
            max_size = max(size, _rounded(base * rng.uniform(0.5, 1.5)))
        scratch.append(Buffer(f"scratch@{step}", size, step, step + 1, kind="scratch",
                              max_size=max_size))
    return problem.replace(buffers=[*problem.buffers, *scratch])


def with_regions(problem: Problem, sram: int, dram_cost: float = 1.0) -> Problem:
    """``problem`` with a fast SRAM of ``sram`` bytes (cost 0) and an unbounded DRAM."""
    return problem.replace(regions=(Region("sram", sram, 0.0), Region("dram", None, dram_cost)))


def _row(model: str, what: str, planner: str, problem: Problem, plan, began: float) -> dict:
    check(problem, plan)
    sizes = problem.sizes if plan.sizes is None else plan.sizes
    variable = problem.max_sizes > problem.sizes
    row = {"model": model, "what": what, "planner": planner,
           "seconds": round(time.perf_counter() - began, 2),
           "granted_kib": round(int(sizes[variable].sum()) / 1024, 1),
           "wanted_kib": round(int(problem.max_sizes[variable].sum()) / 1024, 1)}
    if problem.regions:
        tops = plan.stats["region_sizes"]
        row.update(dram_bytes_kib=round(plan.stats["cost"] / 1024, 1),
                   cost_bound_kib=round(plan.stats["cost_bound"] / 1024, 1),
                   sram_kib=round(tops["sram"] / 1024, 1), dram_kib=round(tops["dram"] / 1024, 1))
    else:
        row.update(granted_bound_kib=round(plan.stats.get("scratch_bound", -1024) / 1024, 1),
                   peak_kib=round(plan.arena_size / 1024, 1),
                   bound_kib=round(plan.best_bound / 1024, 1))
    return row


def measure(model: str, *, sram: int, time_limit: float, seed: int) -> list[dict]:
    """The four plans of one model: scratch heuristic/exact, regions heuristic/exact."""
    problem = with_scratch(from_onnx(onnx_light_dir() / f"light_{model}.onnx"), seed)
    regional = with_regions(problem, sram)
    runs = [("scratch", problem, plan_scratch, plan_scratch_exact),
            ("regions", regional, plan_regions, plan_regions_exact)]
    rows = []
    for what, case, heuristic, exact in runs:
        began = time.perf_counter()
        quick = heuristic(case)
        rows.append(_row(model, what, "heuristic", case, quick, began))
        began = time.perf_counter()
        best = exact(case, time_limit=time_limit, seed=seed, hint=quick)
        rows.append(_row(model, what, "exact", case, best, began))
    return rows


def markdown(rows: list[dict]) -> str:
    """One table per kind of measurement."""
    out = []
    for what in ("scratch", "regions"):
        chosen = [r for r in rows if r["what"] == what]
        columns = [c for c in chosen[0] if c != "what"]
        out.append("| " + " | ".join(columns) + " |")
        out.append("|" + "---|" * len(columns))
        out += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in chosen]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deploy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="squeezenet,bvlc_alexnet,resnet50",
                        help="light ONNX model names, comma-separated")
    parser.add_argument("--sram-kib", type=int, default=256, help="SRAM capacity in KiB")
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per exact run")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated scratch")
    parser.add_argument("--busy", type=int, default=0,
                        help="processes spinning beside the planners (a busy machine)")
    args = parser.parse_args(argv)
    rows = []
    print(f"load average before: {load_average()}, busy loops: {args.busy}\n")
    with busy(args.busy):
        for model in args.models.split(","):
            rows += measure(model.strip(), sram=args.sram_kib * 1024,
                            time_limit=args.time_limit, seed=args.seed)
    print(markdown(rows))
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
