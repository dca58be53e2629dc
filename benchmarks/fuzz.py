"""``python -m benchmarks fuzz``: seeded mutations of real files through every reader.

Every file may be hostile. For each reader (ONNX, ExecuTorch ``.pte``,
TVMScript ``.py``, ``.tflite``, MiniMalloc CSV, memplan JSON) real files are
the seeds (`build_seeds`: tiny torch modules exported to ONNX and ``.pte``, a
Keras model converted to ``.tflite``, a small Relax module printed as
TVMScript, the bundled files, ONNX's light models); `mutate` changes each a
few times over, reproducibly from ``(seed, reader, index)``:

- bytes: a bit flipped, a byte or a little-endian word set to a value that
  breaks lengths and offsets (0, -1, 2^31, 2^63...), a chunk deleted,
  repeated or spliced from another seed, random bytes inserted, the file cut;
- text (CSV, JSON, TVMScript): a number made extreme, a line repeated,
  dropped or swapped, a control character or a deep nesting inserted;
- JSON values (`_json_change`): one of another type or extreme (NaN,
  2^64, 35 KB of text, a nesting), a key dropped, an item repeated;
- ONNX fields (`_onnx_change`): a dimension 0, -1 or 2^62, an element type
  unknown, an operator changed, an input added, a tensor renamed (escape
  sequences, 35 KB), a node repeated 1000 times, the opset, an attribute, an
  initializer's data dropped.

Each mutant goes through ``memplan convert MUTANT -o problem.json`` in a
worker process (`Worker`, restarted after a hang or a crash) and is held to:

- exit 0 with a problem file memplan reads back, or exit 2 with one line on
  stderr, printable and not too long (`memplan.errors.printable_line`);
  nothing escapes ``memplan.cli.main`` (``tracebacks``), the worker does not
  die (``crashes``);
- peak RSS growth within `MEMORY_BOUND` (Linux: ``VmHWM`` reset before each
  run through ``/proc/self/clear_refs``);
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
import io
import json
import os
import random
import re
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

from memplan.errors import LONGEST_LINE

ROOT = Path(__file__).resolve().parents[1]
READERS = {"onnx": ".onnx", "pte": ".pte", "tvmscript": ".py", "tflite": ".tflite",
           "csv": ".csv", "json": ".json"}  # reader -> the suffix of its files
TEXT_READERS = ("tvmscript", "csv", "json")  # mutated as text as well as bytes
WRITES = {"onnx": ".onnx", "pte": ".pte", "csv": ".csv"}  # solve -o in the input's format;
# the other readers' mutants are written as memplan JSON
MEMORY_BOUND = (20, 200 * 2 ** 20)  # peak RSS growth allowed: 20 x the file's bytes + 200 MB
HANG_SECONDS = 60.0  # one run (read, or solve and write) past this is a hang
SOLVE_SECONDS = "0.5"  # solve -o's --time-limit
WRITE_EVERY = 5  # of the mutants that read: one in this many is also planned and written
FAILURES = ("tracebacks", "crashes", "hangs", "over memory", "bad messages",
            "damaged outputs")
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF)
INTERESTING_WORDS = (0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                     2 ** 63 - 1, 2 ** 64 - 1)
EXTREME_NUMBERS = ("0", "-1", "-0", "1e308", "-1e308", "nan", "inf", "2147483648",
                   "9223372036854775808", "18446744073709551617", "9" * 40, "0.5", "1_0",
                   "0x10", "\u0661")
ODD_TEXT = ("\x00", "\x1b[2J", "\ufeff", "\u2028", "\"", "'", ",", "{", "}", "[", "]", "\\",
            "\n", "\r", "\t", "\udcff", "é", "[" * 5000, "{\"a\":" * 3000, "(" * 3000,
            "x" * 100000)


# ------------------------------------------------------------------ the mutation engine
@dataclass
class Mutant:
    """One mutated file: its bytes, and how it was made (its seed file and each change)."""

    data: bytes
    seed_file: str
    changes: list[str] = field(default_factory=list)

    def recipe(self) -> str:
        return f"{self.seed_file}: {'; '.join(self.changes)}"


def _byte_change(data: bytearray, rng: random.Random, donors: list[bytes]) -> str:
    n = len(data)
    kind = rng.choice(("flip", "byte", "word", "delete", "repeat", "insert", "cut", "splice"))
    if n == 0 or (kind == "splice" and not donors):
        kind = "insert"
    at = rng.randrange(max(n, 1))
    if kind == "flip":
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        return f"flip bit {bit} of byte {at}"
    if kind == "byte":
        data[at] = rng.choice(INTERESTING_BYTES)
        return f"byte {at} = {data[at]:#x}"
    if kind == "word":
        width = rng.choice((2, 4, 8))
        value = rng.choice(INTERESTING_WORDS) & (2 ** (8 * width) - 1)
        data[at:at + width] = value.to_bytes(width, "little")
        return f"{width}-byte word at {at} = {value:#x}"
    if kind == "delete":
        size = rng.randint(1, max(1, min(n - at, 64)))
        del data[at:at + size]
        return f"delete {size} bytes at {at}"
    if kind == "repeat":
        size = rng.randint(1, max(1, min(n - at, 256)))
        times = rng.choice((2, 16, 1000))
        data[at:at] = bytes(data[at:at + size]) * times
        return f"repeat {size} bytes at {at} x{times}"
    if kind == "insert":
        size = rng.choice((1, 4, 16, 256))
        data[at:at] = rng.randbytes(size)
        return f"insert {size} random bytes at {at}"
    if kind == "cut":
        del data[at:]
        return f"cut at {at}"
    donor = rng.choice(donors)
    start = rng.randrange(max(len(donor), 1))
    size = rng.randint(1, 512)
    data[at:at + size] = donor[start:start + size]
    return f"splice {size} bytes of another seed at {at}"


def _text_change(text: str, rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(("number", "number", "repeat line", "drop line", "swap lines", "odd"))
    numbers = list(re.finditer(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text))
    lines = text.splitlines(keepends=True)
    if kind == "number" and numbers:
        found = rng.choice(numbers)
        value = rng.choice(EXTREME_NUMBERS)
        return text[:found.start()] + value + text[found.end():], \
            f"number {found.group()!r} at {found.start()} = {value!r}"
    if kind in ("repeat line", "drop line", "swap lines") and len(lines) > 1:
        at = rng.randrange(len(lines))
        if kind == "repeat line":
            times = rng.choice((2, 100))
            lines[at:at + 1] = [lines[at]] * times
            return "".join(lines), f"line {at + 1} x{times}"
        if kind == "drop line":
            del lines[at]
            return "".join(lines), f"drop line {at + 1}"
        other = rng.randrange(len(lines))
        lines[at], lines[other] = lines[other], lines[at]
        return "".join(lines), f"swap lines {at + 1} and {other + 1}"
    at = rng.randrange(len(text) + 1)
    odd = rng.choice(ODD_TEXT)
    shown = odd if len(odd) < 8 else f"{odd[:4]}...x{len(odd)}"
    return text[:at] + odd + text[at:], f"insert {shown!r} at {at}"


def _onnx_change(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A change to one field of an ONNX model, the rest left whole (bytes flipped at random
    mostly break the protobuf framing, and the reader never sees past it)."""
    import onnx

    try:
        model = onnx.ModelProto.FromString(data)
    except Exception:  # noqa: BLE001 - an earlier change broke it: change bytes instead
        buffer = bytearray(data)
        return bytes(buffer), "(not protobuf any more) " + _byte_change(buffer, rng, [])
    graph = model.graph
    values = [*graph.input, *graph.output, *graph.value_info]
    dims = [d for v in values for d in v.type.tensor_type.shape.dim] + \
        [t for t in graph.initializer]
    kind = rng.choice(("dim", "dim", "type", "op", "input", "name", "nodes", "opset",
                       "attribute", "initializer"))
    if kind == "dim" and dims:
        target = rng.choice(dims)
        value = rng.choice((0, -1, 2 ** 31, 2 ** 62, 7))
        if isinstance(target, onnx.TensorProto):
            target.dims[rng.randrange(len(target.dims))] = value if target.dims else 0
            return model.SerializeToString(), f"initializer {target.name!r}: a dim = {value}"
        if rng.random() < 0.3:
            target.dim_param = rng.choice(("N", "", "\x1b[2J", "x" * 1000))
            return model.SerializeToString(), f"a dim = {target.dim_param[:8]!r}"
        target.dim_value = value
        return model.SerializeToString(), f"a dim = {value}"
    if kind == "type" and values:
        target = rng.choice(values)
        target.type.tensor_type.elem_type = rng.choice((0, 8, 23, 99, 2 ** 20))
        return model.SerializeToString(), f"{target.name!r}: elem_type = " \
                                          f"{target.type.tensor_type.elem_type}"
    nodes = list(graph.node)
    if kind == "op" and nodes:
        node = rng.choice(nodes)
        node.op_type = rng.choice(("Loop", "If", "Scan", "Unknown", "Reshape", "Concat", ""))
        return model.SerializeToString(), f"node {node.name!r}: op {node.op_type!r}"
    if kind == "input" and nodes:
        node = rng.choice(nodes)
        name = rng.choice(("", "missing", node.output[0] if node.output else "y"))
        node.input.append(name)
        return model.SerializeToString(), f"node {node.name!r}: input {name!r} added"
    if kind == "name" and nodes:
        node = rng.choice(nodes)
        if node.output:
            node.output[0] = rng.choice(("\x1b]0;t\x07" + "n" * 35000, "", node.input[0]
                                         if node.input else "x"))
            return model.SerializeToString(), f"node {node.name!r}: output renamed"
    if kind == "nodes" and nodes:
        node = rng.choice(nodes)
        times = rng.choice((2, 1000))
        graph.node.extend([node] * times)
        return model.SerializeToString(), f"node {node.name!r} repeated x{times}"
    if kind == "opset" and model.opset_import:
        model.opset_import[0].version = rng.choice((0, 1, 99, 2 ** 40))
        return model.SerializeToString(), f"opset {model.opset_import[0].version}"
    if kind == "attribute" and nodes:
        node = rng.choice(nodes)
        for attribute in node.attribute:
            if attribute.ints:
                attribute.ints[0] = rng.choice((0, -1, 2 ** 62))
                return model.SerializeToString(), f"node {node.name!r}: " \
                                                  f"{attribute.name}[0] = {attribute.ints[0]}"
            if attribute.type == onnx.AttributeProto.INT:
                attribute.i = rng.choice((0, -1, 2 ** 62, 99))
                return model.SerializeToString(), f"node {node.name!r}: " \
                                                  f"{attribute.name} = {attribute.i}"
    if kind == "initializer" and graph.initializer:
        tensor = rng.choice(list(graph.initializer))
        tensor.ClearField("raw_data")
        return model.SerializeToString(), f"initializer {tensor.name!r}: its data dropped"
    buffer = bytearray(data)
    return bytes(buffer), _byte_change(buffer, rng, [])


JSON_VALUES = (None, True, 0, -1, 2 ** 53 + 1, 2 ** 64, 1e308, float("nan"), float("inf"), 0.5,
               "", "\x1b[2J", "x" * 35000, [], {}, [[[[[[[[]]]]]]]], {"a": {"b": {}}})


def _json_change(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A change to one value of a JSON document, the rest left whole: a value of another
    type or an extreme one, a key dropped, a list item repeated."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):  # an earlier change broke it: change the text
        text, change = _text_change(data.decode("utf-8", "surrogateescape"), rng)
        return text.encode("utf-8", "surrogateescape"), change
    places = []  # (container, key or index, path)

    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                places.append((value, key, f"{path}.{key}"))
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for at, item in enumerate(value):
                places.append((value, at, f"{path}[{at}]"))
                walk(item, f"{path}[{at}]")

    walk(document, "$")
    if not places:
        return json.dumps(rng.choice(JSON_VALUES)).encode(), "the document replaced"
    container, key, path = rng.choice(places)
    kind = rng.choice(("value", "value", "value", "drop", "repeat"))
    if kind == "drop":
        del container[key]
        return json.dumps(document).encode(), f"drop {path}"
    if kind == "repeat" and isinstance(container, list):
        times = rng.choice((2, 1000))
        container[key:key + 1] = [container[key]] * times
        return json.dumps(document).encode(), f"{path} x{times}"
    value = rng.choice(JSON_VALUES)
    container[key] = value
    shown = repr(value) if len(repr(value)) < 20 else f"{repr(value)[:8]}...x{len(repr(value))}"
    return json.dumps(document).encode(), f"{path} = {shown}"


def mutate(seed_files: list[Path], reader: str, seed: int, index: int) -> Mutant:
    """Mutant number ``index`` of ``reader``'s seeds: the same for the same arguments."""
    rng = random.Random(f"{seed}:{reader}:{index}")
    source = rng.choice(seed_files)
    data = source.read_bytes()
    mutant = Mutant(data, source.name)
    donors = [p.read_bytes() for p in seed_files if p != source][:3]
    for _ in range(rng.choice((1, 1, 2, 3, 4))):
        if reader in TEXT_READERS and rng.random() < 0.6:
            text, change = _text_change(mutant.data.decode("utf-8", "surrogateescape"), rng)
            mutant.data = text.encode("utf-8", "surrogateescape")
        elif reader == "onnx" and rng.random() < 0.7:
            mutant.data, change = _onnx_change(mutant.data, rng)
        elif reader == "json" and rng.random() < 0.7:
            mutant.data, change = _json_change(mutant.data, rng)
        else:
            buffer = bytearray(mutant.data)
            change = _byte_change(buffer, rng, donors)
            mutant.data = bytes(buffer)
        mutant.changes.append(change)
    return mutant


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
    from memplan.frontends import memplan_json
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


# ------------------------------------------------------------------ the seeds
def _onnx_seeds(folder: Path) -> None:
    import onnx
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.linear = torch.nn.Linear(64, 10)

        def forward(self, x):
            h = torch.relu(self.conv(x))
            return self.linear(h.reshape(1, -1)[:, :64]).softmax(-1)

    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(Tiny().eval(), (torch.randn(1, 3, 4, 4),), str(folder / "tiny.onnx"),
                          dynamo=False)
    shutil.copy(ROOT / "memplan" / "data" / "squeezenet.onnx", folder / "squeezenet.onnx")
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    for name in ("light_squeezenet.onnx", "light_bvlc_alexnet.onnx", "light_vgg19.onnx",
                 "light_inception_v1.onnx"):
        if (light / name).exists():
            shutil.copy(light / name, folder / name)


def _pte_seeds(folder: Path) -> None:
    from benchmarks.pte_models import export_pte

    (folder / "mlp.pte").write_bytes(export_pte("mlp"))


def _tvmscript_seeds(folder: Path) -> None:
    from benchmarks import tvm_zoo as zoo

    mod = zoo.export(zoo.Model("mlp", zoo.MLP((16, 32, 8)), (2, 16)))
    (folder / "mlp.py").write_text(mod.script())


def _tflite_seeds(folder: Path) -> None:
    from benchmarks.tflite_models import _keras, convert

    _, keras = _keras()
    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential([keras.Input((8, 8, 3), batch_size=1),
                              layers.Conv2D(4, 3, padding="same", activation="relu"),
                              layers.MaxPooling2D(), layers.Flatten(), layers.Dense(5)])
    (folder / "tiny.tflite").write_bytes(convert(model, "float32"))


def _csv_seeds(folder: Path) -> None:
    for path in sorted((ROOT / "benchmarks" / "data" / "minimalloc").glob("*.csv"))[:4]:
        shutil.copy(path, folder / path.name)
    (folder / "offsets.csv").write_text("id,lower,upper,size,offset\na,0,3,4,0\nb,3,9,4,0\n"
                                        "c,1,5,2,4\n")


def _json_seeds(folder: Path) -> None:
    from memplan import Alias, Buffer, Problem, Region, plan_with
    from memplan.frontends import memplan_json

    problem = Problem([Buffer("a", 12, 0, 2), Buffer("b", 5, 0, 1, alignment=4),
                       Buffer("c", 6, 1, 3, regions=("fast", "slow")),
                       Buffer("d", 3, 2, 4, offset=32), Buffer("s", 4, 1, 2, kind="scratch",
                                                               max_size=16)],
                      aliases=[Alias("b", "a", 4), Alias("c", "d", 0, optional=True)],
                      conflicts=[("a", "d")], capacity=4096, name="seed",
                      regions=(Region("fast", 64), Region("slow", None, 1.0)))
    memplan_json.write_problem(folder / "problem.json", problem)
    plain = Problem([Buffer(f"t{i}", 8 * (i + 1), i % 3, i % 3 + 2) for i in range(6)],
                    name="plain")
    memplan_json.write_plan(folder / "planned.json", plain, plan_with("greedy_by_size", plain))


SEEDS = {"onnx": _onnx_seeds, "pte": _pte_seeds, "tvmscript": _tvmscript_seeds,
         "tflite": _tflite_seeds, "csv": _csv_seeds, "json": _json_seeds}


def build_seeds(reader: str, folder: Path) -> list[Path]:
    """``reader``'s seed files in ``folder`` (built once, in a child process: this one
    imports neither torch nor TVM nor TensorFlow)."""
    folder = Path(folder) / reader
    if not any(folder.glob(f"*{READERS[reader]}")):
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "TF_CPP_MIN_LOG_LEVEL": "3"}
        done = subprocess.run([sys.executable, "-m", "benchmarks.fuzz", "--seeds", reader,
                               str(folder)], cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"building the {reader} seeds failed: {done.stderr[-2000:]}")
    return sorted(folder.glob(f"*{READERS[reader]}"))


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
    elif sys.argv[1:2] == ["--seeds"]:
        SEEDS[sys.argv[2]](Path(sys.argv[3]))
    else:
        sys.exit(main())
