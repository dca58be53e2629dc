"""``python -m benchmarks fuzz``: seeded mutations of real files through every reader.

Every file may be hostile. For each reader (ONNX, ExecuTorch ``.pte``,
TVMScript ``.py``, ``.tflite``, MiniMalloc CSV, memplan JSON) real files are
the seeds (`benchmarks.fuzz_seeds`), changed a few times over by a seeded
engine (`benchmarks.fuzz_mutations`: bytes, text, JSON values, ONNX fields),
reproducibly from ``(seed, reader, index)``.

Each mutant goes through ``memplan convert MUTANT -o problem.json`` (a
JSON one that reads, through ``memplan validate MUTANT MUTANT`` too: its plan)
in a worker process (`Worker`, restarted after a hang or a crash) and is held to:

- exit 0 with a problem file memplan reads back, or exit 2 with one line on
  stderr, printable and not too long (`memplan.errors.printable_line`);
  nothing escapes ``memplan.cli.main`` (``tracebacks``), the worker does not
  die (``crashes``);
- peak RSS growth within `MEMORY_BOUND` (Linux: ``VmHWM`` reset before each
  run through ``/proc/self/clear_refs``; the libraries memplan imports on first
  need, `LAZY_IMPORTS`, are imported before);
- done within `HANG_SECONDS` (else the worker is killed: ``hangs``);
- writers: every `WRITE_EVERY`-th mutant that reads is planned by
  ``memplan solve -o`` into its own format (ONNX, ``.pte``, CSV; the others
  into memplan JSON), and what is written must pass the format's own loader
  (`LOADERS`: onnx.checker, ExecuTorch's runtime, memplan's CSV and JSON
  readers with the plan validated) whenever the input passes it
  (``damaged outputs``). The loaders run in a worker of their own: a loader
  that crashes on a mutant only rejects it.

::

    python -m benchmarks fuzz --minutes 10             # every reader, an equal share each
    python -m benchmarks fuzz --reader csv,json --inputs 500 --seed 3

Per reader it prints the inputs tried and the failures by class, and keeps
each failing input (with its recipe) under ``--out``. The suite runs the same
engine with a fixed seed and a few inputs per reader (``tests/test_fuzz.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.fuzz_mutations import Mutant, mutate
from benchmarks.fuzz_seeds import READERS, ROOT, build_seeds
from memplan.errors import LONGEST_LINE

WRITES = {"onnx": ".onnx", "pte": ".pte", "csv": ".csv"}  # solve -o in the input's format;
# the other readers' mutants are written as memplan JSON
MEMORY_BOUND = (20, 200 * 2 ** 20)  # peak RSS growth allowed: 20 x the file's bytes + 200 MB
# what memplan imports when a file first needs it (onnxruntime's symbolic shape inference
# and sympy: about 240 MB), imported by each worker before its first run
LAZY_IMPORTS = ("onnxruntime.tools.symbolic_shape_infer", "onnx.reference")
HANG_SECONDS = 60.0  # one run (read, or solve and write) past this is a hang
SOLVE_SECONDS = "0.5"  # solve -o's --time-limit
WRITE_EVERY = 5  # of the mutants that read: one in this many is also planned and written
FAILURES = ("tracebacks", "crashes", "hangs", "over memory", "bad messages",
            "damaged outputs")


# ------------------------------------------------------------------ the worker processes
def _rss_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # Linux: VmHWM back to the current RSS
        return True
    except OSError:
        return False


def _run_command(argv: list[str]) -> dict:
    """``memplan *argv`` in this process: its exit code, stderr, what escaped, RSS growth."""
    from memplan.cli import main

    measured = _reset_peak()
    before = _rss_kib("VmRSS")
    out, err = io.StringIO(), io.StringIO()
    escaped = None
    code = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
        except BaseException as error:  # noqa: BLE001 - what escapes main: the failure sought
            frame = traceback.extract_tb(error.__traceback__)[-1]
            escaped = f"{type(error).__name__}: {error} (at {Path(frame.filename).name}:" \
                      f"{frame.lineno} in {frame.name})"
    peak = _rss_kib("VmHWM")
    growth = (peak - before) * 1024 if measured and peak and before else None
    return {"code": code, "err": err.getvalue(), "escaped": escaped, "growth": growth}


def _load_onnx(path: str) -> None:
    import onnx

    onnx.checker.check_model(onnx.load(path))


def _load_pte(path: str) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(Path(path).read_bytes())
    for name in sorted(program.method_names):
        program.load_method(name)


def _load_memplan(path: str) -> None:
    import memplan
    from memplan.formats import memplan_json
    from memplan.validate import validate

    problem = memplan.load(path)
    if path.endswith(".json"):
        document = json.loads(Path(path).read_text())
        if "plan" in document:  # a problem with its plan: the plan must hold
            plan = memplan_json.read_plan(path, problem)
            broken = [v for v in validate(problem, plan) if v.kind != "capacity"]
            if broken:
                raise ValueError(f"the plan written breaks its problem: {broken[0]}")


LOADERS = {".onnx": _load_onnx, ".pte": _load_pte, ".csv": _load_memplan,
           ".json": _load_memplan}  # the format's own loader of a written file


def _run_loader(path: str) -> dict:
    try:
        LOADERS[Path(path).suffix](path)
    except Exception as error:  # noqa: BLE001 - any refusal is the verdict
        return {"accepts": False, "why": f"{type(error).__name__}: {error}"[:500]}
    return {"accepts": True, "why": ""}


def _serve() -> None:
    """The worker's loop: one JSON request a line on stdin, one answer a line on the real
    stdout (what the libraries print to file descriptor 1 goes nowhere)."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    for module in LAZY_IMPORTS:  # imported once, not a file's growth
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    for line in sys.stdin:
        request = json.loads(line)
        answer = _run_command(request["argv"]) if "argv" in request else \
            _run_loader(request["load"])
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


class Worker:
    """A process that runs requests one at a time, each within `HANG_SECONDS`; killed and
    started again after a hang or a crash."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()

    def _start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
            self.log.seek(0)
            self.log.truncate()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.fuzz", "--serve"], cwd=ROOT, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        return self.process

    def ask(self, request: dict, timeout: float = HANG_SECONDS) -> dict:
        """The answer, or ``{"hang": seconds}`` / ``{"crash": what}``."""
        process = self._start()
        began = time.monotonic()
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except BrokenPipeError:
            return {"crash": self._died()}
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        if not ready:
            self.close()
            return {"hang": time.monotonic() - began}
        line = process.stdout.readline()
        if not line:
            return {"crash": self._died()}
        return json.loads(line)

    def _died(self) -> str:
        code = self.process.wait()
        self.log.seek(0)
        tail = self.log.read().decode("utf-8", "replace").strip().splitlines()[-3:]
        self.process = None
        return f"exit {code}" + (f": {' | '.join(tail)}" if tail else "")

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


# ------------------------------------------------------------------ holding each run to it
@dataclass
class Tally:
    """What one reader's fuzzing found: counts by class, and each failure's recipe."""

    reader: str
    counts: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, kind: str, mutant: Mutant, what: str) -> None:
        self.counts[kind] += 1
        self.failures.append(f"{self.reader} {kind}: {mutant.recipe()} -> {what[:600]}")

    def row(self) -> dict:
        return {"reader": self.reader, "tried": self.counts["tried"],
                "read": self.counts["read"], "refused": self.counts["refused"],
                "written": self.counts["written"],
                **{kind: self.counts[kind] for kind in FAILURES}}


def memory_bound(file_bytes: int) -> int:
    """The peak RSS growth allowed for a file of ``file_bytes`` (`MEMORY_BOUND`)."""
    per_byte, base = MEMORY_BOUND
    return per_byte * file_bytes + base


def _held(tally: Tally, mutant: Mutant, answer: dict, argv: list[str], size: int) -> bool:
    """Whether one run kept the rules (each broken rule counted); False also when it
    refused the input."""
    command = argv[0]
    if "hang" in answer:
        tally.fail("hangs", mutant, f"memplan {command}: no answer in {answer['hang']:.0f} s")
        return False
    if "crash" in answer:
        tally.fail("crashes", mutant, f"memplan {command}: the worker died ({answer['crash']})")
        return False
    if answer["growth"] is not None and answer["growth"] > memory_bound(size):
        tally.fail("over memory", mutant, f"memplan {command}: peak RSS grew by "
                                          f"{answer['growth'] / 2 ** 20:.0f} MiB for "
                                          f"{size} bytes")
    err = answer["err"]
    if answer["escaped"] or "Traceback" in err:
        tally.fail("tracebacks", mutant, f"memplan {command}: "
                                         f"{(answer['escaped'] or err).strip()[-600:]}")
        return False
    lines = [line for line in err.splitlines() if ": warning: " not in line]
    if answer["code"] == 2:
        if len(lines) != 1 or not lines[0].startswith(f"memplan {command}: error: ") \
                or not lines[0].isprintable() or len(lines[0]) > LONGEST_LINE + 100:
            tally.fail("bad messages", mutant, f"memplan {command}: exit 2 with {err!r}"[:600])
        return False
    if answer["code"] not in (0, 1):
        tally.fail("bad messages", mutant, f"memplan {command}: exit {answer['code']}: "
                                           f"{err.strip()[:400]}")
        return False
    return answer["code"] == 0 or command == "solve"


def fuzz_reader(reader: str, seed_files: list[Path], *, seed: int, inputs: int | None = None,
                seconds: float | None = None, worker: Worker, loader: Worker,
                keep: Path | None = None) -> Tally:
    """Mutants of ``seed_files`` through ``reader`` (see the module doc): ``inputs`` of them,
    or as many as ``seconds`` allow; a failing one kept in ``keep`` with its recipe."""
    tally = Tally(reader)
    suffix = READERS[reader]
    ends = None if seconds is None else time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="memplan-fuzz-") as scratch:
        folder = Path(scratch)
        for path in seed_files:  # the reader's imports done before any RSS is measured
            worker.ask({"argv": ["info", str(path)]})
        index = 0
        while (inputs is None or index < inputs) and (ends is None or time.monotonic() < ends):
            mutant = mutate(seed_files, reader, seed, index)
            path = folder / f"mutant{suffix}"
            path.write_bytes(mutant.data)
            failed = len(tally.failures)
            _one(tally, mutant, path, folder, worker, loader)
            if keep is not None and len(tally.failures) > failed:
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, keep / f"{reader}-{seed}-{index}{suffix}")
                (keep / f"{reader}-{seed}-{index}.txt").write_text(
                    "\n".join(tally.failures[failed:]) + "\n")
            index += 1
    return tally


def _flags(tally: Tally) -> list[str]:
    """Every other ONNX mutant read with ``--no-strict``: past what shape inference refuses."""
    return ["--no-strict"] if tally.reader == "onnx" and tally.counts["tried"] % 2 else []


def _one(tally: Tally, mutant: Mutant, path: Path, folder: Path, worker: Worker,
         loader: Worker) -> None:
    tally.counts["tried"] += 1
    problem = folder / "problem.json"
    problem.unlink(missing_ok=True)
    argv = ["convert", str(path), "-o", str(problem), *_flags(tally)]
    if not _held(tally, mutant, worker.ask({"argv": argv}), argv, len(mutant.data)):
        tally.counts["refused"] += 1
        return
    tally.counts["read"] += 1
    if tally.reader == "json":  # a problem with its plan: the plan's reader too
        argv = ["validate", str(path), str(path)]
        _held(tally, mutant, worker.ask({"argv": argv}), argv, len(mutant.data))
    verdict = loader.ask({"load": str(problem)})
    if not verdict.get("accepts"):
        tally.fail("damaged outputs", mutant, f"memplan convert -o problem.json: "
                                              f"{verdict.get('why') or verdict}")
    if tally.counts["read"] % WRITE_EVERY:
        return
    written = folder / f"written{WRITES.get(tally.reader, '.json')}"
    written.unlink(missing_ok=True)
    argv = ["solve", str(path), "-o", str(written), "--time-limit", SOLVE_SECONDS, "--quiet",
            *_flags(tally)]
    if not _held(tally, mutant, worker.ask({"argv": argv}), argv, len(mutant.data)) \
            or not written.exists():
        return
    tally.counts["written"] += 1
    verdict = loader.ask({"load": str(written)})
    if verdict.get("accepts"):
        return
    if written.suffix in (".onnx", ".pte"):  # the format's loader on the input itself
        shutil.copy(path, folder / f"input{written.suffix}")
        if not loader.ask({"load": str(folder / f"input{written.suffix}")}).get("accepts"):
            return  # the input was no valid file of its format either
    tally.fail("damaged outputs", mutant, f"memplan solve -o {written.name}: "
                                          f"{verdict.get('why') or verdict}")


# ------------------------------------------------------------------ the command
def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in READERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown reader {unknown[0]!r}; readers: "
                                         f"{', '.join(READERS)}")
    return names


def _table(rows: list[dict]) -> str:
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=1.0,
                        help="minutes of fuzzing in all, an equal share per reader (default 1)")
    parser.add_argument("--inputs", type=int, help="mutants per reader instead of --minutes")
    parser.add_argument("--reader", type=_names, default=list(READERS),
                        help=f"comma-separated: {', '.join(READERS)} (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations (default 0)")
    parser.add_argument("--seeds", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz"
                        / "seeds", help="folder of the seed files, built when missing")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz",
                        help="failing inputs and their recipes go to OUT/failures")
    args = parser.parse_args(argv)
    seeds = {reader: build_seeds(reader, args.seeds) for reader in args.reader}
    share = None if args.inputs else 60 * args.minutes / len(args.reader)
    worker, loader = Worker(), Worker()
    rows, failures = [], []
    began = time.monotonic()
    try:
        for reader in args.reader:
            for old in (args.out / "failures").glob(f"{reader}-{args.seed}-*"):
                old.unlink()  # an earlier run's: this run says what fails now
            tally = fuzz_reader(reader, seeds[reader], seed=args.seed, inputs=args.inputs,
                                seconds=share, worker=worker, loader=loader,
                                keep=args.out / "failures")
            rows.append(tally.row())
            failures += tally.failures
            print(f"{reader}: {tally.row()}", file=sys.stderr, flush=True)
    finally:
        worker.close()
        loader.close()
    print(f"python -m benchmarks fuzz {' '.join(argv if argv is not None else sys.argv[1:])}"
          f"  ({time.monotonic() - began:.0f} s, load {os.getloadavg()[0]:.1f})\n")
    print(_table(rows))
    for line in failures:
        print(f"- {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        _serve()
    else:
        sys.exit(main())
