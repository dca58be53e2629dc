"""A plan proven inside TensorFlow Lite Micro's own interpreter, beside TFLM's own planner.

Why: an embedded team trusts what TFLM itself reports. The validator checks a
plan against its problem; this module checks that the problem tells the
truth about the model, and measures both planners where they will run:
TFLM's Python interpreter (the ``tflite-micro`` package, the ``tflite``
extra), which allocates every tensor in one arena and plans it with its
greedy planner, or takes the offline plan found in the model's metadata.

Steps (`prove`):

- the problem from the model (`memplan.tflite.tflite`) and a plan
  (given, or `memplan.solve`), checked by the validator; the planned model
  is the same model with the plan as ``OfflineMemoryAllocation`` metadata
  (`memplan.tflite.tflite_model`);
- both models run in TFLM on the same random inputs (seeded; every graph
  input, its dtype's range); the outputs must be bit-identical. The planned
  model's arena is sized from the plan (its arena, plus room for TFLM's head
  and tail), so a valid plan with gaps (a tensor at a high offset) runs too;
  an arena past `MAX_ARENA` is not asked for. When TFLM refuses the model
  (it would with its own planner too: a zero-size output is a "dynamic
  tensor" to it; a corrupt model may even crash its interpreter, so each
  run is in a forked child) the report says so in one line (``refused``)
  and proves nothing;
- TFLM's ``RecordingMicroAllocator`` reports the arena's head (the planned
  tensors and scratch buffers) and tail (persistent data). With memplan's
  plan, the head must equal memplan's arena size rounded up to TFLM's
  16 bytes; it is larger only when kernels' scratch buffers (which TFLM
  places itself, around the offline plan) find no gap in it;
- for each model, the smallest ``arena_size`` with which TFLM allocates and
  invokes, found by bisection over whole bytes (failures are monotone in
  the arena size: TFLM takes what it needs from both ends of one array).
  With some arenas too small, TFLM's Python interpreter crashes instead of
  failing, so every try runs in a forked child process.

Cost: two interpreter runs, plus about log2(arena) forked interpreter
constructions per bisection; TFLM prints its allocation report and its errors on the C
stderr, which is read through a temporary file while they run.
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memplan.errors import ProblemError
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.tflite import tflite
from memplan.tflite.tflite_model import planned_model
from memplan.validate import check

_REPORT = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")
MAX_ARENA = 1 << 30  # the largest arena memplan asks TFLM's interpreter for, in bytes


def runtime():
    """TFLM's Python runtime module, or a one-line error naming the extra."""
    try:
        from tflite_micro import runtime as tflm_runtime
    except ImportError:
        raise ProblemError(f"running TFLite-Micro needs the {tflite.EXTRA!r} extra: "
                           f"pip install 'memplan[{tflite.EXTRA}]'") from None
    return tflm_runtime


@contextmanager
def _c_stderr(sink: list[str]) -> Iterator[None]:
    """Send file descriptor 2 (where TFLM's MicroPrintf writes) to ``sink`` meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            sink.append(capture.read().decode("utf-8", "replace"))


@dataclass
class TflmRun:
    """One model in TFLM: its outputs and what the recording allocator reported."""

    outputs: list[np.ndarray]
    head: int  # bytes of the arena's head: planned tensors and scratch buffers
    tail: int  # bytes of the tail: persistent data (and variable tensors TFLM places)
    total: int


def random_inputs(data: bytes, seed: int = 0) -> list[np.ndarray]:
    """One random array per graph input, in its dtype's range (floats: standard normal)."""
    interpreter = _interpreter(data, _generous_arena(data))
    count = len(tflite.indices(tflite.read_model(data).subgraphs[0].inputs))
    rng = np.random.default_rng(seed)
    arrays = []
    for index in range(count):
        details = interpreter.get_input_details(index)
        shape, dtype = tuple(int(d) for d in details["shape"]), np.dtype(details["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype))
    return arrays


def _generous_arena(data: bytes, planned: int = 0) -> int:
    """An arena that fits TFLM's own plan (every tensor's bytes, twice, and 64 KiB more for
    its head and tail), plus ``planned`` bytes: the arena of an offline plan, which may
    leave gaps TFLM's planner would not (a tensor at a high offset)."""
    tree = tflite.read_model(data)
    total = sum(tflite.tensor_bytes(t) for t in tree.subgraphs[0].tensors or []
                if not tflite.is_constant(tree, t))
    return 2 * total + 65536 + -(-planned // tflite.ALIGNMENT) * tflite.ALIGNMENT


class TflmRefused(RuntimeError):
    """TFLM would not allocate or run a model; the message is TFLM's, on one line."""


def _interpreter(data: bytes, arena_size: int):
    sink: list[str] = []
    try:
        with _c_stderr(sink):
            return runtime().Interpreter.from_bytes(data, arena_size=arena_size)
    except RuntimeError as error:
        said = " ".join(sink[-1].split()) if sink else ""
        raise TflmRefused(f"{error}: {said}" if said else str(error)) from None


def run(data: bytes, inputs: list[np.ndarray], arena_size: int | None = None) -> TflmRun:
    """Run the model in TFLM once on ``inputs``; its outputs and the arena report."""
    interpreter = _interpreter(data, arena_size or _generous_arena(data))
    for index, array in enumerate(inputs):
        interpreter.set_input(array, index)
    try:
        interpreter.invoke()
    except RuntimeError as error:
        raise TflmRefused(" ".join(str(error).split())) from None
    count = len(tflite.indices(tflite.read_model(data).subgraphs[0].outputs))
    outputs = [np.array(interpreter.get_output(i)) for i in range(count)]
    sink: list[str] = []
    with _c_stderr(sink):
        interpreter.print_allocations()
    found = {what: int(value) for what, value in _REPORT.findall("".join(sink))}
    if set(found) != {"total", "head", "tail"}:
        raise RuntimeError(f"no allocation report from TFLM: {''.join(sink)[:200]!r}")
    return TflmRun(outputs, found["head"], found["tail"], found["total"])


def _encoded(kind: str, value) -> bytes:
    """A child's answer as an ``.npz`` of plain arrays: a list of arrays, a `TflmRun`, or
    a message. Never a pickle: a model that took over TFLM in the child must not reach
    the parent's code through what it sends back."""
    arrays = {"kind": np.array(kind)}
    if kind != "ok":
        arrays["text"] = np.array(str(value))
    elif isinstance(value, TflmRun):
        arrays["run"] = np.array([value.head, value.tail, value.total], np.int64)
        arrays.update({f"a{k}": output for k, output in enumerate(value.outputs)})
    else:
        arrays.update({f"a{k}": array for k, array in enumerate(value)})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _decoded(answer: bytes) -> tuple[str, object]:
    """`_encoded`'s answer, read with ``allow_pickle=False``."""
    with np.load(io.BytesIO(answer), allow_pickle=False) as stored:
        kind = str(stored["kind"])
        if kind != "ok":
            return kind, str(stored["text"])
        arrays = [stored[f"a{k}"] for k in range(sum(name.startswith("a") for name in
                                                     stored.files))]
        if "run" not in stored.files:
            return kind, arrays
        head, tail, total = (int(v) for v in stored["run"])
        return kind, TflmRun(arrays, head, tail, total)


def _isolated(function, *args):
    """``function(*args)`` in a forked child (where the platform forks), its result sent
    back as arrays (`_encoded`): TFLM's interpreter crashes the whole process on some
    corrupt models. A crash, or
    a `RuntimeError`/`ValueError` from TFLM there, becomes `TflmRefused`."""
    if not hasattr(os, "fork"):
        return function(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into the caller
        code = 1
        try:
            os.close(readable)
            quiet = os.open(os.devnull, os.O_WRONLY)  # what a crash prints is not ours to show
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            try:
                answer = ("ok", function(*args))
            except ProblemError as error:
                answer = ("problem", str(error))
            except (RuntimeError, ValueError) as error:
                answer = ("refused", " ".join(str(error).split()))
            except BaseException as error:  # noqa: BLE001 - carried to the parent
                answer = ("error", f"{type(error).__name__}: {error}")
            with os.fdopen(writable, "wb") as pipe:
                pipe.write(_encoded(*answer))
            code = 0
        finally:
            os._exit(code)
    os.close(writable)
    with os.fdopen(readable, "rb") as pipe:
        answer = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not answer:
        code = os.waitstatus_to_exitcode(status)
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        raise TflmRefused(f"TFLM's interpreter crashed on the model ({how})")
    try:
        kind, value = _decoded(answer)
    except (ValueError, OSError, KeyError) as error:  # a child TFLM took over, or cut short
        raise TflmRefused(f"TFLM's run sent back an unreadable answer ({error})") from None
    if kind == "ok":
        return value
    raise {"problem": ProblemError, "refused": TflmRefused}.get(kind, RuntimeError)(value)


def _try(data: bytes, arena_size: int, inputs: list[np.ndarray]) -> bool:
    try:
        interpreter = runtime().Interpreter.from_bytes(data, arena_size=arena_size)
        for index, array in enumerate(inputs):
            interpreter.set_input(array, index)
        interpreter.invoke()
    except (RuntimeError, ValueError):
        return False
    return True


def works(data: bytes, arena_size: int, inputs: list[np.ndarray]) -> bool:
    """True when TFLM allocates the model in ``arena_size`` bytes and invokes it.

    Each try runs in a forked child (where the platform forks): with some
    arenas too small, TFLM's interpreter crashes instead of failing, and a
    crash counts as not working. TFLM's messages go nowhere.
    """
    runtime()  # the missing extra is an error here, not a failed try
    if not hasattr(os, "fork"):
        sink: list[str] = []
        with _c_stderr(sink):
            return _try(data, arena_size, inputs)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: report by exit code only, never return into the caller
        code = 1
        try:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            code = 0 if _try(data, arena_size, inputs) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def smallest_arena(data: bytes, inputs: list[np.ndarray], start: int) -> int:
    """The smallest ``arena_size`` that `works`, by bisection from a guess ``start``."""
    high = max(int(start), 1)
    while not works(data, high, inputs):
        if high > 2 ** 31:
            raise RuntimeError("TFLM allocates the model in no arena up to 2 GiB")
        high *= 2
    low = 0  # an empty arena holds nothing
    while high - low > 1:
        middle = (low + high) // 2
        if works(data, middle, inputs):
            high = middle
        else:
            low = middle
    return high


@dataclass
class TflmReport:
    """TFLM's own planner beside memplan's plan, both run in TFLM."""

    model: str
    tensors: int  # tensors of the subgraph (weights included)
    buffers: int  # tensors TFLM plans (the problem's buffers)
    arena_size: int  # memplan's plan
    tflm: TflmRun | None  # TFLM's own planner (None: TFLM refused the model)
    planned: TflmRun | None  # memplan's offline plan (None: not run)
    min_arena: int | None = None  # smallest arena_size TFLM runs with, its own planner
    planned_min_arena: int | None = None  # ... with memplan's plan
    mismatches: list[str] = field(default_factory=list)  # outputs that differ
    refused: str | None = None  # why TFLM did not run the model (then nothing is proven)

    @property
    def expected_head(self) -> int:
        """memplan's arena rounded up to TFLM's alignment."""
        return -(-self.arena_size // tflite.ALIGNMENT) * tflite.ALIGNMENT

    @property
    def head_matches(self) -> bool:
        return self.planned is not None and self.planned.head == self.expected_head

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.mismatches and self.head_matches

    def __str__(self) -> str:
        if self.refused is not None:
            return f"{self.model}: not proven: {self.refused}"
        from memplan.viz import show_bytes as b

        lines = [f"{self.model}: {self.tensors} tensors, {self.buffers} buffers planned "
                 "(TFLM's planned tensors and kernel scratch)",
                 f"  TFLM planner   head {b(self.tflm.head)}, tail {b(self.tflm.tail)}"
                 + (f", smallest arena {b(self.min_arena)}" if self.min_arena else ""),
                 f"  memplan plan   head {b(self.planned.head)} (memplan arena "
                 f"{b(self.arena_size)}), tail {b(self.planned.tail)}"
                 + (f", smallest arena {b(self.planned_min_arena)}"
                    if self.planned_min_arena else ""),
                 "  outputs        " + ("bit-identical" if not self.mismatches
                                        else "DIFFER: " + ", ".join(self.mismatches))]
        if not self.head_matches:
            lines.append(f"  head           {b(self.planned.head)} != {b(self.expected_head)}: "
                         "kernel scratch buffers outside memplan's plan")
        return "\n".join(lines)


def prove(model: str | os.PathLike | bytes, problem: Problem | None = None,
          plan: Plan | None = None, *, seed: int = 0, bisect: bool = True,
          time_limit: float = 10) -> TflmReport:
    """Run ``model`` in TFLM with its own planner and with ``plan``; compare and measure.

    ``problem`` defaults to the frontend's reading of the model, ``plan`` to
    `memplan.solve` with ``time_limit``. ``bisect`` adds the smallest working
    arena sizes.
    """
    data, file = tflite.model_bytes(model)
    if problem is None:
        problem = tflite.from_tflite(model, name=Path(file).stem if file else None)  # names it
    if plan is None:
        from memplan.api import solve

        plan = solve(problem, time_limit=time_limit, seed=seed)
    check(problem, plan)
    planned = planned_model(data, problem, plan)
    report = TflmReport(model=problem.name or (file or "model"),
                        tensors=len(tflite.read_model(data).subgraphs[0].tensors or []),
                        buffers=len(problem), arena_size=int(plan.arena_size), tflm=None,
                        planned=None)
    arena = _generous_arena(data, int(plan.arena_size))
    if arena > MAX_ARENA:
        report.refused = (f"the plan's arena of {plan.arena_size} B needs a TFLM arena of "
                          f"{arena} B, more than memplan runs TFLM with ({MAX_ARENA} B)")
        return report
    try:
        inputs = _isolated(random_inputs, data, seed)
        report.tflm = own = _isolated(run, data, inputs)
    except TflmRefused as error:
        report.refused = f"TFLM refuses the model with its own planner: {error}"
        return report
    try:
        report.planned = ours = _isolated(run, planned, inputs, arena)
    except TflmRefused as error:
        report.refused = (f"TFLM refuses the model with memplan's plan in an arena of {arena} B "
                          f"(the plan's {plan.arena_size} B, TFLM's head and tail): {error}")
        return report
    report.mismatches = [f"output {i}" for i, (a, b) in enumerate(zip(own.outputs, ours.outputs,
                                                                     strict=True))
                         if a.dtype != b.dtype or a.shape != b.shape
                         or a.tobytes() != b.tobytes()]
    if bisect:
        report.min_arena = smallest_arena(data, inputs, own.total)
        report.planned_min_arena = smallest_arena(planned, inputs, ours.total)
    return report


def prove_plan_file(model: str | os.PathLike, plan_file: str | os.PathLike, *, seed: int = 0,
                    bisect: bool = True) -> TflmReport:
    """`prove` with the plan of a memplan JSON file (``memplan solve model.tflite -o
    plan.json``): it must place every buffer the model's problem has."""
    from memplan.formats.memplan_json import read_plan

    problem = tflite.from_tflite(model)
    return prove(model, problem, read_plan(plan_file, problem), seed=seed, bisect=bisect)

