"""``python -m benchmarks load``: the same verdicts and plans on a busy machine.

Build machines are busy (``make -j``, CI runners). memplan's adaptive choices count
CPU time (`memplan.solver.canonical.Race.cpu`) and every planner keeps
``greedy_by_size``'s plan as its ceiling, so busy processes beside it should slow it by
about the CPU share they take, and never change an answer. Steps:

- **fit**: MiniMalloc's eleven problems at their capacity (benchmarks/data/minimalloc)
  and their time-reversed copies (`benchmarks.peers.variant`), each through
  ``memplan.solve(problem, time_limit=T)`` in a fresh process, quiet and then with
  ``--busy`` processes spinning beside it (default: twice the cores), side by side:
  fitted or not, wall and CPU seconds (the process's, every thread), busy / quiet wall;
- **limits** (``--executorch``): at time limits 0, 0.001 and 0.01 s on the ten models of
  `benchmarks.executorch_models`, quiet and busy: the ExecuTorch pass
  (`memplan.executorch`; its arenas against ``greedy_by_size``'s on the same arenas, its
  program's bytes against those of ExecuTorch's own greedy pass), the library call
  (``memplan.solve(from_executorch(edge))`` against ``greedy_by_size`` and ExecuTorch's
  greedy plan of that problem) and the command (``memplan solve greedy.pte``); then per
  model and limit the largest memplan / greedy ratio, quiet and busy (above 1: a defect).

Every figure comes with the load average (``uptime``) when it was taken: on a shared
machine "quiet" is only quieter.

    python -m benchmarks load                       # fit, 22 problems, quiet and busy
    python -m benchmarks load --problem F,I --busy 4
    python -m benchmarks load --no-fit --executorch --models lstm,resnet
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from benchmarks.suites import REPO

DATA = REPO / "benchmarks" / "data" / "minimalloc"
PROBLEMS = "ABCDEFGHIJK"
VARIANTS = ("original", "reversed")
LIMITS = (0.0, 0.001, 0.01)

FIT = """
import json, sys, time
import memplan
from benchmarks.peers import variant
problem = variant(memplan.load(sys.argv[1]), sys.argv[2])
wall, cpu = time.perf_counter(), time.process_time()
plan = memplan.solve(problem, time_limit=float(sys.argv[3]))
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
bad = [v for v in memplan.validate(problem, plan) if v.kind != "capacity"]
print(json.dumps(dict(status=plan.status, fitted=plan.status in ("feasible", "optimal"),
                      valid=not bad, wall=wall, cpu=cpu)))
"""


@contextmanager
def busy(processes: int):
    """``processes`` Python loops spinning beside the caller, killed on the way out."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(processes)]
    try:
        time.sleep(0.5 if loops else 0)
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


def load_average() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def fit_once(path: Path, name: str, limit: float) -> dict:
    """One ``memplan.solve`` in a fresh process (the clocks start after the import)."""
    proc = subprocess.run([sys.executable, "-c", FIT, str(path), name, str(limit)],
                          capture_output=True, text=True, cwd=REPO, timeout=3 * limit + 120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode:
        return dict(status="error: " + (proc.stderr.strip().splitlines() or ["?"])[-1],
                    fitted=False, valid=False, wall=0.0, cpu=0.0)
    row = json.loads(proc.stdout)
    row["load"] = load_average()
    return row


def fit_table(problems: str, limit: float, processes: int) -> tuple[str, bool]:
    """The fit rows, quiet then busy for each problem; and whether every verdict held."""
    lines = [f"| problem | quiet: fitted | wall s | CPU s | load | busy ({processes} loops): "
             "fitted | wall s | CPU s | load | busy / quiet wall |", "|---" * 10 + "|"]
    held, ratios = True, []
    for letter in problems:
        path = DATA / f"{letter}.1048576.csv"
        for name in VARIANTS:
            quiet = fit_once(path, name, limit)
            with busy(processes):
                loaded = fit_once(path, name, limit)
            ratio = loaded["wall"] / quiet["wall"] if quiet["wall"] else float("nan")
            ratios.append(ratio)
            held &= quiet["valid"] and loaded["valid"] and quiet["fitted"] == loaded["fitted"]
            label = letter + (" reversed" if name == "reversed" else "")
            lines.append(f"| {label} | {_yes(quiet)} | {quiet['wall']:.2f} | {quiet['cpu']:.2f} "
                         f"| {quiet.get('load', '')} | {_yes(loaded)} | {loaded['wall']:.2f} | "
                         f"{loaded['cpu']:.2f} | {loaded.get('load', '')} | {ratio:.1f}x |")
            print(lines[-1], file=sys.stderr, flush=True)
    ratios.sort()
    lines.append(f"\nbusy / quiet wall: median {ratios[len(ratios) // 2]:.1f}x, "
                 f"largest {ratios[-1]:.1f}x; every verdict the same: {held}")
    return "\n".join(lines), held


def _yes(row: dict) -> str:
    if not row["valid"]:
        return f"**{row['status']}, INVALID**"
    return "yes" if row["fitted"] else f"**no** ({row['status']})"


def limit_rows(models: list[str], limits: tuple[float, ...], processes: int) -> str:
    """ExecuTorch pass, library call and command at each limit, quiet and busy (see the
    doc); then, per model and limit, the largest memplan / greedy ratio of each run."""
    import memplan
    from benchmarks import executorch_models as em
    from memplan.executorch.executorch import planned_offsets

    lines = ["| model | limit s | busy loops | load | " + " | ".join(LIMIT_COLUMNS) +
             " | largest memplan / greedy |", "|---" * (len(LIMIT_COLUMNS) + 5) + "|"]
    largest: dict[tuple[str, float], dict[int, str]] = {}
    for name in [n for n in em.MODELS if not models or any(m in n for m in models)]:
        build, xnnpack = em.MODELS[name]
        edge = em.export(build(), xnnpack=xnnpack)
        greedy_program = em.lower(edge)
        problem = memplan.from_executorch(greedy_program)  # = from_executorch(edge): lowered
        placed = planned_offsets(greedy_program)  # ExecuTorch's greedy plan of it
        executorch_greedy = max((placed[b.id] + b.size for b in problem.buffers), default=0)
        with tempfile.TemporaryDirectory() as folder:
            pte = Path(folder) / "greedy.pte"
            pte.write_bytes(greedy_program.buffer)
            for processes_now in (0, processes):
                with busy(processes_now):
                    for limit in limits:
                        row = _limit_row(edge, greedy_program, problem, executorch_greedy,
                                         pte, limit)
                        ratio = max(row[a] / row[b] for a, b in LIMIT_RATIOS)
                        largest.setdefault((name, limit), {})[processes_now] = \
                            f"{ratio:.4f} ({load_average()})"
                        lines.append(f"| {name} | {limit:g} | {processes_now} | "
                                     f"{load_average()} | " + " | ".join(
                                         f"{x:,}" for x in row.values()) + f" | {ratio:.4f} |")
                        print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", f"| model | limit s | largest memplan / greedy, quiet (load) | busy, "
                  f"{processes} loops (load) |", "|---" * 4 + "|"]
    lines += [f"| {name} | {limit:g} | {runs[0]} | {runs[processes]} |"
              for (name, limit), runs in largest.items()]
    return "\n".join(lines)


LIMIT_COLUMNS = ("pass bytes", "greedy_by_size bytes (pass)", "program bytes (memplan's pass)",
                 "program bytes (ExecuTorch's greedy)", "library bytes",
                 "greedy_by_size bytes (program)", "ExecuTorch's greedy bytes (program)",
                 "command bytes (.pte)")
LIMIT_RATIOS = (("pass bytes", "greedy_by_size bytes (pass)"),
                ("program bytes (memplan's pass)", "program bytes (ExecuTorch's greedy)"),
                ("library bytes", "greedy_by_size bytes (program)"),
                ("library bytes", "ExecuTorch's greedy bytes (program)"),
                ("command bytes (.pte)", "greedy_by_size bytes (program)"))


def _limit_row(edge, greedy_program, problem, executorch_greedy: int, pte: Path,
               limit: float) -> dict[str, int]:
    """The bytes of `LIMIT_COLUMNS` at one time limit: the pass's arenas and program against
    greedy_by_size's on the same arenas and ExecuTorch's greedy program;
    ``memplan.solve(from_executorch(edge), time_limit=limit)`` and ``memplan solve
    greedy.pte --time-limit limit`` against greedy_by_size's and ExecuTorch's greedy plan
    (``executorch_greedy`` bytes) of that problem."""
    import memplan
    import memplan.executorch
    from benchmarks import executorch_models as em

    planning_pass = memplan.executorch.memory_planning_pass(time_limit=limit, verify=False)
    program_bytes = em.arena_bytes(em.lower(edge, planning_pass))
    report = planning_pass.reports[-1]
    return dict(zip(LIMIT_COLUMNS, (
        sum(plan.arena_size for plan in report.plans.values()),
        sum(memplan.plan_with("greedy_by_size", p).arena_size for p in report.problems.values()),
        program_bytes, em.arena_bytes(greedy_program),
        memplan.solve(problem, time_limit=limit).arena_size,
        memplan.plan_with("greedy_by_size", problem).arena_size, executorch_greedy,
        _command_bytes(pte, limit)), strict=True))


def _command_bytes(model: Path, limit: float) -> int:
    """The arena ``memplan solve MODEL --time-limit LIMIT`` plans (its plan file)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "plan.json"
        subprocess.run([sys.executable, "-m", "memplan.cli", "solve", str(model), "--time-limit",
                        str(limit), "-o", str(out), "--quiet"], cwd=REPO, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600, check=True)
        return int(json.loads(out.read_text())["plan"]["arena_size"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default=PROBLEMS, type=lambda t: t.replace(",", ""),
                        help="MiniMalloc's problems by letter (default all: ABCDEFGHIJK)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1),
                        help="processes spinning beside the busy runs (default: 2 x cores)")
    parser.add_argument("--no-fit", action="store_true", help="skip MiniMalloc's problems")
    parser.add_argument("--executorch", action="store_true",
                        help="also the ExecuTorch pass, library and command at small limits")
    parser.add_argument("--models", default="", help="ExecuTorch models whose names contain "
                                                     "these (comma-separated; default all)")
    parser.add_argument("--limits", default=",".join(f"{x:g}" for x in LIMITS))
    args = parser.parse_args(argv)
    print(f"load average before: {load_average()} ({os.cpu_count()} cores)")
    held = True
    if not args.no_fit:
        table, held = fit_table(args.problem, args.time_limit, args.busy)
        print(table)
    if args.executorch:
        limits = tuple(float(x) for x in args.limits.split(","))
        print(limit_rows([m for m in args.models.split(",") if m], limits, args.busy))
    print(f"load average after: {load_average()}")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
