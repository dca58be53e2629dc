"""TVMScript models are read without running any of their Python.

A printed module reads as TVM's own parser reads it; files that try to run
code (``__import__``, ``open``, shape strings, decorators, defaults,
f-strings, lambdas, TVM's code-taking builders, a builtin used before the
file binds its name) are refused with one line naming the file, and no file
appears; arithmetic bombs are refused before Python computes them. Needs the
``tvm`` extra.
"""

from __future__ import annotations

import pytest
import tvm

from benchmarks import tvm_zoo as zoo
from memplan import ProblemError
from memplan.cli import main
from memplan.tvm.relax import read_tvmscript

SYMBOLIC = '''# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def add(var_x: T.handle, var_y: T.handle):
        n = T.int64()
        x = T.match_buffer(var_x, (n, T.int64(4)))
        y = T.match_buffer(var_y, (n, T.int64(4)))
        for i, j in T.grid(n, T.int64(4)):
            y[i, j] = x[i, j] + T.float32(1) * T.float32(-2 % 3)
        for k in range(T.int64(2) << 3):
            T.evaluate(k // 2)

    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.add, (x,), out_ty=R.Tensor((n, 4), dtype="float32"))
            z = R.call_tir(cls.add, (y,), out_ty=R.Tensor((n, 4), dtype="float32"))
            R.output(z)
        return z
'''
MAIN = '''    @R.function
    def main(x: R.Tensor((8, 8), dtype="float32")) -> R.Tensor((8, 8), dtype="float32"):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
'''
TOUCH = '__import__("pathlib").Path("ran").touch()'
QUOTED = TOUCH.replace('"', "'")  # inside a string
HOSTILE = {  # name -> (what replaces MAIN's lines, the reason the refusal gives)
    "annotation": (("(8, 8)", f"(8, {TOUCH} or 8)"), "name '__import__'"),
    "shape string": (("(8, 8), dtype", f'("{QUOTED} or 8", 8), dtype'), "the string"),
    "default": (('x: R.Tensor((8, 8), dtype="float32")',
                 f'x: R.Tensor((8, 8), dtype="float32") = {TOUCH}'), "defaults"),
    "decorator": (("@R.function", f"@R.function(pure={TOUCH})"), "not decorated"),
    "other decorator": (("@R.function", f"@{TOUCH}"), "not decorated"),
    "f-string": (("y = R.add(x, x)", 'y = R.add(x, R.str(f"{open(\'ran\', \'w\')}"))'),
                 "JoinedStr"),
    "lambda": (("(8, 8)", "((lambda: 8)(), 8)"), "Lambda"),
    "comprehension": (("(8, 8)", "tuple(8 for n in 'ab')"), "GeneratorExp"),
    "walrus": (("(8, 8)", "((n := 8), 8)"), "NamedExpr"),
    "dunder": (("y = R.add(x, x)", "y = R.add.__globals__"), "attribute '__globals__'"),
    "tvm": (("y = R.add(x, x)", "y = tvm.runtime.load_module('ran.so')"), "name 'tvm'"),
    "module chain": (("y = R.add(x, x)", "y = R.parser.parse('ran')"), "module"),
    "macro": (("y = R.add(x, x)", "y = T.macro(x)"), "T.macro outside a decorator"),
    "backend namespace": (("y = R.add(x, x)", "y = T.cuda.x"), "not an IR builder"),
    "namespace value": (("y = R.add(x, x)", "y = R"), "itself as a value"),
    "call in a target": (("y = R.add(x, x)", "y[open('ran', 'w')] = R.add(x, x)"),
                         "target"),
    "call in a buffer index": (("return y\n", "return y\n\n    @T.prim_func\n    def f(A: "
                                "T.Buffer((8,), 'float32'), open: T.int32):\n"
                                "        A[open('ran', 'w')] = T.float32(0)\n"), "target"),
    "rebound builtin": (("y = R.add(x, x)", "y = open('ran', 'w')\n            open = x"),
                        "not a TVMScript module"),  # TVM's parser, with no builtins, refuses
    "power": (("(8, 8)", "(2 ** 10 ** 10, 8)"), "power"),
    "repetition": (("(8, 8)", "((8,) * 99999999999, 8)"), "repeated literal"),
    "shift": (("(8, 8)", "(1 << 99999999999, 8)"), "shift"),
    "big integer": (("(8, 8)", f"({10 ** 30}, 8)"), "constant int"),
    "nesting": (("(8, 8)", "(" * 150 + "8" + ")" * 150 + ", 8"), ""),
    "endless shape": (("return y\n", "return y\n\n    @T.prim_func\n    def f(A: "
                       "T.Buffer((T.int64), 'float32')):\n        T.evaluate(0)\n"),
                      "T.int64 as a value"),  # tuple(T.int64) never ends in TVM's parser
}
OUTSIDE = {
    "import": ("import os\n", "Import at the top level"),
    "class statement": ("", "name '__import__'"),  # in the class: run by TVM's parser
    "base class": ("", "not a plain @I.ir_module class"),
}


def _module(main: str = MAIN, head: str = "") -> str:
    return f"{head}@I.ir_module\nclass Module:\n{main}"


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a file that ran would leave "ran"
    return tmp_path


def test_printed_module_reads_as_tvm_parser_reads_it(scratch):
    path = scratch / "symbolic.py"
    path.write_text(SYMBOLIC)
    tvm.ir.assert_structural_equal(read_tvmscript(path), tvm.script.from_source(SYMBOLIC))
    path.write_text(_module())
    assert main(["info", str(path)]) == 0


def test_printed_decoder_with_symbolic_lengths_reads_as_tvm_parser_reads_it(scratch):
    """A small Llama-style decoder as ``IRModule.script()`` prints it: ``TypeVar`` lines,
    TIR blocks, symbolic shapes."""
    text = zoo.export(zoo.llama(layers=1, d=32, heads=2, kv_heads=1, ffn=64, vocab=50,
                                seq=16)).script()
    assert 'TypeVar("' in text and "T.sblock" in text
    path = scratch / "decoder.py"
    path.write_text(text)
    tvm.ir.assert_structural_equal(read_tvmscript(path), tvm.script.from_source(text))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_code_in_a_module_is_refused_and_never_runs(scratch, name, capsys):
    (old, new), reason = HOSTILE[name]
    assert old in MAIN
    path = scratch / "model.py"
    path.write_text(_module(MAIN.replace(old, new)))
    with pytest.raises(ProblemError, match=f"model.py.*{reason}"):
        read_tvmscript(path)
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "model.py" in err
    assert not (scratch / "ran").exists()


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_python_around_the_module_is_refused(scratch, name):
    head, reason = OUTSIDE[name]
    text = _module(head=head)
    if name == "class statement":
        text += f"    {TOUCH}\n"
    if name == "base class":
        text = text.replace("class Module:", "class Module(object):")
    path = scratch / "model.py"
    path.write_text(text)
    with pytest.raises(ProblemError, match=reason):
        read_tvmscript(path)
    assert not (scratch / "ran").exists()


def test_a_module_not_in_utf8_is_refused_naming_the_byte(scratch):
    path = scratch / "latin.py"
    path.write_bytes(_module().replace("class", "# r\xe9sum\xe9\nclass").encode("latin-1"))
    with pytest.raises(ProblemError, match=r"latin.py: not UTF-8 text: byte 0xe9"):
        read_tvmscript(path)
