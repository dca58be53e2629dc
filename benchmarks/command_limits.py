"""``python -m benchmarks.command_limits``: does every command keep ``--time-limit`` and Ctrl-C?

The promise: ``memplan solve``, ``compare`` and ``explain`` end within
``--time-limit`` + 10 % (+ 1 s of start-up), counted from the command's
start, on 30k and 50k buffers; a SIGINT ends any of them within a second,
keeping the best plan. Steps:

- write the two large problems (`benchmarks.traces.training_step_trace` of
  30k buffers, `benchmarks.generate.network_like` of 50k) to memplan JSON
  files in ``--work``;
- run each command as a user does (``python -m memplan.cli ...``, a fresh
  process, SIGINT not ignored even when this runs in the background) and time the
  whole process, start-up and reading included, wall and CPU (on a loaded machine the
  CPU seconds say how much of the wall time the command had a core);
- for the Ctrl-C rows, send SIGINT ``--signal-after`` seconds into the run
  and time from the signal to the exit (exit code and what was kept shown);
- ``--busy N``: N busy loops beside the commands (`benchmarks.load.busy`), as on a
  build machine running other work;
- print a markdown table with the load average before and after.

    python -m benchmarks.command_limits --time-limit 5 [--busy 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.generate import network_like
from benchmarks.load import busy
from benchmarks.suites import REPO
from benchmarks.traces import training_step_trace
from memplan.formats import memplan_json

PROBLEMS = {"train30k": lambda: training_step_trace(30000, 2),
            "net50k": lambda: network_like(50000, 5)}
COMMANDS = {"solve": ("solve", "-o", "{out}"), "compare": ("compare",),
            "explain": ("explain",), "explain --capacity": ("explain", "--capacity", "30GiB")}
INTERRUPTED = {"solve": ("solve", "-o", "{out}"), "explain --capacity":
               ("explain", "--capacity", "30GiB"), "compare": ("compare",)}


def _files(work: Path) -> dict[str, Path]:
    work.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, build in PROBLEMS.items():
        files[name] = work / f"{name}.json"
        if not files[name].exists():
            memplan_json.write_problem(files[name], build())
    return files


def _argv(command: tuple[str, ...], problem: Path, limit: float, work: Path) -> list[str]:
    head, *rest = command
    out = str(work / f"{problem.stem}.plan.json")
    return [sys.executable, "-m", "memplan.cli", head, str(problem), "--time-limit",
            f"{limit:g}", *(part.format(out=out) for part in rest)]


def whole(argv: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds of the whole process (all its threads), and its exit code."""
    began, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          cwd=REPO, check=False)
    return time.perf_counter() - began, _children_cpu() - cpu, done.returncode


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def ctrl_c(argv: list[str], after: float) -> tuple[float, int]:
    """Seconds from a SIGINT ``after`` seconds into the run to the exit, and the exit code."""
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             cwd=REPO)
    time.sleep(after)
    child.send_signal(signal.SIGINT)
    sent = time.perf_counter()
    code = child.wait(timeout=600)
    return time.perf_counter() - sent, code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.command_limits",
                                     description=__doc__)
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--signal-after", type=float, default=4.0,
                        help="seconds into a run when SIGINT is sent (default 4)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memplan-command-limits"))
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="busy loops beside the commands (default 0)")
    args = parser.parse_args(argv)
    # run in the background (nohup ... &), this process and so the commands would ignore
    # SIGINT; a terminal's Ctrl-C is what is measured
    signal.signal(signal.SIGINT, signal.default_int_handler)
    files = _files(args.work)
    with busy(args.busy):
        _measure(files, args)
    return 0


def _measure(files: dict[str, Path], args: argparse.Namespace) -> None:
    """The two tables: each command's time against its limit, and Ctrl-C to exit."""
    limit = args.time_limit
    print(f"load before: {os.getloadavg()[0]:.1f} (1-minute average, {os.cpu_count()} cores, "
          f"{args.busy} busy loops beside)")
    print(f"\n| problem | command | wall s (--time-limit {limit:g}) | / (limit + 10 % + 1 s) "
          f"| CPU s | exit |\n|---|---|---|---|---|---|")
    for name, path in files.items():
        for label, command in COMMANDS.items():
            seconds, cpu, code = whole(_argv(command, path, limit, args.work))
            ratio = seconds / (1.1 * limit + 1)
            shown = f"**{ratio:.2f}**" if ratio > 1 else f"{ratio:.2f}"
            print(f"| {name} | {label} | {seconds:.1f} | {shown} | {cpu:.1f} | {code} |",
                  flush=True)
    print(f"\n| problem | command | seconds from SIGINT ({args.signal_after:g} s in) to exit "
          f"| exit |\n|---|---|---|---|")
    for name, path in files.items():
        for label, command in INTERRUPTED.items():
            seconds, code = ctrl_c(_argv(command, path, 120, args.work), args.signal_after)
            print(f"| {name} | {label} | {seconds:.2f} | {code} |", flush=True)
    print(f"\nload after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
