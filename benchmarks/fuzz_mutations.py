"""The mutation engine of `benchmarks.fuzz`: a real file changed a few times over,
reproducibly from ``(seed, reader, index)``.

- bytes (`_byte_change`): a bit flipped, a byte or a little-endian word set to a
  value that breaks lengths and offsets (0, -1, 2^31, 2^63...), a chunk
  deleted, repeated or spliced from another seed, random bytes inserted, the
  file cut;
- text (`_text_change`; CSV, JSON, TVMScript): a number made extreme, a line
  repeated, dropped or swapped, a control character or a deep nesting inserted;
- JSON values (`_json_change`): one of another type or extreme (NaN, 2^64,
  35 KB of text, a nesting), a key dropped, an item repeated;
- ONNX fields (`_onnx_change`): a dimension 0, -1 or 2^62, an element type
  unknown, an operator changed, an input added, a tensor renamed (escape
  sequences, 35 KB), a node repeated 1000 times, the opset, an attribute, an
  initializer's data dropped.

Each change is described in words (`Mutant.recipe`), so that a failure says
how to make its input again.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

TEXT_READERS = ("tvmscript", "csv", "json")  # mutated as text as well as bytes
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF)
INTERESTING_WORDS = (0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                     2 ** 63 - 1, 2 ** 64 - 1)
EXTREME_NUMBERS = ("0", "-1", "-0", "1e308", "-1e308", "nan", "inf", "2147483648",
                   "9223372036854775808", "18446744073709551617", "9" * 40, "0.5", "1_0",
                   "0x10", "\u0661")
ODD_TEXT = ("\x00", "\x1b[2J", "\ufeff", "\u2028", "\"", "'", ",", "{", "}", "[", "]", "\\",
            "\n", "\r", "\t", "\udcff", "é", "[" * 5000, "{\"a\":" * 3000, "(" * 3000,
            "x" * 100000)


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
