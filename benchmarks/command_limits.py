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
- ``--problems``: problems of the ``large`` and ``huge`` suites instead (their files
  written as `benchmarks.scale_measure` writes them), the commands alone (no Ctrl-C
  rows), each with the time a process takes to start and read the file (memplan's
  imports, and pandas for ``compare``) just before: the promise there is the limit +
  10 % + that reading;
- print a markdown table with the load average before and after.

    python -m benchmarks.command_limits --time-limit 5 [--busy 5]
    python -m benchmarks.command_limits --time-limit 5,60 --problems network-1m \\
        --commands compare,explain --work /tmp/memplan-huge
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


READ = "import sys, memplan.cli, memplan.api; memplan.api.load(sys.argv[1])"
STARTUP = {"compare": "import pandas; "}  # what else a command imports before its work


def _files(work: Path, names: str = "") -> dict[str, Path]:
    work.mkdir(parents=True, exist_ok=True)
    if names:
        from benchmarks.scale_measure import problem_file

        return {name: problem_file(work, name) for name in names.split(",")}
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


def whole(argv: list[str]) -> tuple[float, float, int, bool]:
    """Wall and CPU seconds of the whole process (all its threads), its exit code, and
    whether it said first that it could not keep its limit."""
    began, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=REPO, check=False)
    return time.perf_counter() - began, _children_cpu() - cpu, done.returncode, \
        "beyond --time-limit" in done.stderr


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
    parser.add_argument("--time-limit", default="5", help="comma-separated seconds")
    parser.add_argument("--problems", default="", help="comma-separated problems of the large "
                                                       "and huge suites (default: the two)")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help=f"comma-separated, of {', '.join(COMMANDS)} (default: all)")
    parser.add_argument("--signal-after", type=float, default=4.0,
                        help="seconds into a run when SIGINT is sent (default 4)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memplan-command-limits"))
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="busy loops beside the commands (default 0)")
    args = parser.parse_args(argv)
    # run in the background (nohup ... &), this process and so the commands would ignore
    # SIGINT; a terminal's Ctrl-C is what is measured
    signal.signal(signal.SIGINT, signal.default_int_handler)
    files = _files(args.work, args.problems)
    with busy(args.busy):
        _measure(files, args)
    return 0


def _measure(files: dict[str, Path], args: argparse.Namespace) -> None:
    """The two tables: each command's time against its limit, and Ctrl-C to exit."""
    print(f"load before: {os.getloadavg()[0]:.1f} (1-minute average, {os.cpu_count()} cores, "
          f"{args.busy} busy loops beside)")
    print("\n| problem | command | --time-limit | wall s | read s | / (limit + 10 % + read) "
          "| CPU s | said | exit | load |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for name, path in files.items():
        for limit in (float(t) for t in args.time_limit.split(",")):
            for label in args.commands.split(","):
                read = whole([sys.executable, "-c", STARTUP.get(label, "") + READ, str(path)]
                             )[0] if args.problems else 1.0
                seconds, cpu, code, said = whole(_argv(COMMANDS[label], path, limit, args.work))
                ratio = seconds / (1.1 * limit + read)
                shown = f"**{ratio:.2f}**" if ratio > 1 else f"{ratio:.2f}"
                print(f"| {name} | {label} | {limit:g} | {seconds:.1f} | {read:.1f} | {shown} | "
                      f"{cpu:.1f} | {'yes' if said else '-'} | {code} | "
                      f"{os.getloadavg()[0]:.1f} |", flush=True)
    if args.problems:
        return
    limit = float(args.time_limit.split(",")[0])
    print(f"\n| problem | command | seconds from SIGINT ({args.signal_after:g} s in) to exit "
          f"| exit |\n|---|---|---|---|")
    for name, path in files.items():
        for label, command in INTERRUPTED.items():
            seconds, code = ctrl_c(_argv(command, path, 120, args.work), args.signal_after)
            print(f"| {name} | {label} | {seconds:.2f} | {code} |", flush=True)
    print(f"\nload after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
