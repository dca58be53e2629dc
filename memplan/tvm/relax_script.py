"""TVMScript read without running the file's Python: the subset ``IRModule.script()`` writes.

Why: TVM's parser (``tvm.script.from_source``) evaluates every annotation,
decorator, argument and expression of the file with Python's ``eval``, with
Python's builtins and the ``tvm`` package in reach, so that
``R.Tensor((8, __import__("os").system(...)))`` in a shape would run. A model
file is data. So `parse_script` first checks the file's syntax tree
(`check_script`) and accepts only what a printed module holds:

- at the top, one class decorated ``@I.ir_module`` (no base, no keyword), and
  ``name = TypeVar("name")`` lines (symbolic type parameters); no import;
- in it, functions decorated ``@R.function`` or ``@T.prim_func`` (keyword
  arguments: constants; no defaults, ``*args`` or ``**kwargs``) and expression
  statements (``I.module_attrs(...)``);
- in functions: assignments, ``with``, ``for``, ``while``, ``if``, ``assert``,
  ``return``, ``pass``, expressions, nested decorated functions;
- expressions: constants (integers within 64 bits, floats, strings, ``True``,
  ``False``, ``None``), names, attributes, calls, subscripts, slices, tuples,
  lists, dicts, arithmetic, comparisons, boolean and conditional expressions;
  no lambda, comprehension, f-string, starred argument, walrus, ``await``;
- a name read is ``I``, ``R``, ``T`` (only as an attribute's base) or one the
  file binds; a bound name is none of those nor a Python builtin; ``range``
  only as a ``for`` loop's iterator (TVM's parser reads it as ``T.serial``);
- no attribute starts with ``_``; a chain from ``I``, ``R`` or ``T`` resolves,
  name by name, in TVM's script namespaces to its IR builders and operators
  (objects of the modules in ``BUILDERS``; modules only under
  ``tvm.relax.op``), never to what takes code (``DENIED``); the decorators
  only as decorators;
- against arithmetic bombs: no ``**``, shifts only by constants up to 64, no
  repetition of a literal string or sequence.

Then TVM's parser runs with only ``I``, ``R``, ``T`` and ``TypeVar`` in scope
and no builtins at all, a second wall. Cost: one walk over the syntax tree.
A module outside the subset can still be planned: build it in Python and
pass the ``IRModule`` to `memplan.from_relax`.
"""

from __future__ import annotations

import ast
import types
from typing import Any

from memplan.errors import ProblemError

ROOTS = ("I", "R", "T")  # the script namespaces: tvm.script's ir, relax, tirx
BUILDERS = ("tvm.relax.op", "tvm.relax.expr", "tvm.relax.script.builder", "tvm.relax.distributed",
            "tvm.relax.script.parser.entry", "tvm.tirx.op", "tvm.tirx.expr",
            "tvm.tirx.script.builder.ir", "tvm.tirx.script.parser.entry", "tvm.script.ir_builder",
            "tvm.script.parser.ir.entry", "tvm.ir.expr", "tvm.ir.type", "tvm.ir.prim",
            "tvm.runtime._tensor", "tvm_ffi._tensor")  # where an I/R/T name may lead
DENIED = frozenset({"macro", "inline", "jit", "pyfunc", "constexpr", "call_kernel",
                    "external_kernel"})  # they take Python code or run it
DECORATORS = {"ir_module": "I", "function": "R", "prim_func": "T"}  # only as decorators
STATEMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return, ast.With,
              ast.For, ast.While, ast.If, ast.Assert, ast.Pass, ast.FunctionDef)
EXPRESSIONS = (ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Slice,
               ast.Tuple, ast.List, ast.Dict, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
               ast.IfExp, ast.keyword, ast.withitem, ast.expr_context, ast.operator,
               ast.unaryop, ast.boolop, ast.cmpop, ast.arguments, ast.arg)
RESERVED = frozenset(ROOTS) | {"TypeVar", "tvm", "ir", "tir", "relax", "tirx", "Tx", "Axis",
                               "range"}  # TVM's parser's own names
SHAPES = ("Tensor", "Shape", "DTensor")  # Relax evaluates the strings of their shapes
SHAPE_NODES = (ast.Expression, ast.Name, ast.Constant, ast.Attribute, ast.BinOp, ast.UnaryOp,
               ast.expr_context, ast.operator, ast.unaryop)  # a string TVM may evaluate
INT_BITS = 64  # the widest integer TVM's IR holds


def parse_script(text: str, file: str) -> Any:
    """The ``IRModule`` of TVMScript ``text`` (from ``file``), checked by `check_script`
    and parsed by TVM with no builtins in scope."""
    import tvm.script

    check_script(text, file)
    return tvm.script.from_source(text, extra_vars={**_namespaces(*ROOTS, "TypeVar"),
                                                    "__builtins__": {}})


def check_script(text: str, file: str) -> None:
    """Refuse (`ProblemError` naming ``file``, line and construct) TVMScript outside the
    subset of the module docstring, before any of it is evaluated."""
    try:
        tree = ast.parse(text, filename=file)
        _Check(file, _namespaces(*ROOTS)).module(tree)
    except SyntaxError as error:
        raise ProblemError(f"not Python: {error.msg}", file=file, line=error.lineno) from None
    except RecursionError:
        raise ProblemError("nested too deeply to read", file=file) from None


def _namespaces(*names: str) -> dict[str, Any]:
    """The objects TVM's parser gives these names (``_default_globals``: its own table)."""
    from tvm.script.parser.core.entry import _default_globals

    return {name: value for name, value in _default_globals().items() if name in names}


class _Check:
    """One walk over a file's syntax tree; the first construct outside the subset is
    refused naming its line."""

    def __init__(self, file: str, namespaces: dict[str, Any]):
        self.file = file
        self.namespaces = namespaces
        self.bound: set[str] = set()
        self.dialect = "I"  # the namespace of the function being read: R or T

    def refuse(self, node: ast.AST, what: str) -> None:
        raise ProblemError(f"{what}: outside the TVMScript memplan reads (it runs no code "
                           f"of a model file)", file=self.file, line=getattr(node, "lineno", None))

    def module(self, tree: ast.Module) -> None:
        classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
        if len(classes) != 1:
            self.refuse(tree, "not one module class (@I.ir_module)")
        for node in ast.walk(tree):  # every name the file binds, wherever
            self.bind(node)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.module_class(node)
            elif not (isinstance(node, ast.Assign) and len(node.targets) == 1
                      and isinstance(node.targets[0], ast.Name)
                      and _is_call(node.value, "TypeVar", node.targets[0].id)):
                self.refuse(node, f"{type(node).__name__} at the top level")

    def bind(self, node: ast.AST) -> None:
        names = []
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.append((node, node.name))
        elif isinstance(node, ast.arg):
            names.append((node, node.arg))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append((node, node.id))
        for where, name in names:
            if name in RESERVED or name.startswith("_"):
                self.refuse(where, f"binds the name {name!r}")
            self.bound.add(name)

    def module_class(self, node: ast.ClassDef) -> None:
        if node.bases or node.keywords or len(node.decorator_list) != 1 \
                or not self.is_decorator(node.decorator_list[0], "ir_module"):
            self.refuse(node, f"class {node.name!r} is not a plain @I.ir_module class")
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                self.function(stmt)
            elif isinstance(stmt, ast.Expr):
                self.expression(stmt.value)
            else:
                self.refuse(stmt, f"{type(stmt).__name__} in the module class")

    def function(self, node: ast.FunctionDef) -> None:
        args = node.args
        if args.vararg or args.kwarg or args.defaults or args.kw_defaults or args.posonlyargs \
                or args.kwonlyargs:
            self.refuse(node, f"function {node.name!r} has defaults or special parameters")
        if len(node.decorator_list) != 1 or not any(
                self.is_decorator(node.decorator_list[0], name) for name in ("function",
                                                                            "prim_func")):
            self.refuse(node, f"function {node.name!r} is not decorated @R.function or "
                              f"@T.prim_func")
        outer, self.dialect = self.dialect, node.decorator_list[0].func.value.id \
            if isinstance(node.decorator_list[0], ast.Call) else node.decorator_list[0].value.id
        for arg in args.args:
            if arg.annotation is not None:
                self.expression(arg.annotation)
        if node.returns is not None:
            self.expression(node.returns)
        for stmt in node.body:
            self.statement(stmt)
        self.dialect = outer

    def is_decorator(self, node: ast.expr, name: str) -> bool:
        """``@X.name`` or ``@X.name(key=constant, ...)``, X the namespace it belongs to."""
        call = node if isinstance(node, ast.Call) else None
        target = call.func if call else node
        if not (isinstance(target, ast.Attribute) and target.attr == name
                and isinstance(target.value, ast.Name) and target.value.id == DECORATORS[name]):
            return False
        return call is None or (not call.args and all(
            k.arg and isinstance(k.value, ast.Constant) for k in call.keywords))

    def statement(self, node: ast.stmt) -> None:
        if not isinstance(node, STATEMENTS):
            self.refuse(node, f"{type(node).__name__} statement")
        if isinstance(node, ast.FunctionDef):
            self.function(node)
            return
        if isinstance(node, ast.For):
            loop = node.iter
            if isinstance(loop, ast.Call) and isinstance(loop.func, ast.Name) \
                    and loop.func.id == "range" and not node.orelse:  # TVM's parser: T.serial
                parts = [*loop.args, *(k.value for k in loop.keywords)]
            else:
                parts = [loop]
            parts += [node.target, *node.body, *node.orelse]
        else:
            parts = list(ast.iter_child_nodes(node))
        for child in parts:
            if isinstance(child, ast.stmt):
                self.statement(child)
            elif isinstance(child, ast.withitem):
                self.expression(child.context_expr)
                if child.optional_vars is not None:
                    self.expression(child.optional_vars)
            elif isinstance(child, ast.expr):
                self.expression(child)
            elif not isinstance(child, ast.expr_context | ast.operator):
                self.refuse(node, f"{type(child).__name__} in a statement")

    def expression(self, root: ast.expr) -> None:
        bases = set()  # the nodes that are an attribute's base
        for node in ast.walk(root):
            if not isinstance(node, EXPRESSIONS):
                self.refuse(root, f"{type(node).__name__} expression")
            if isinstance(node, ast.Attribute):
                if node.attr.startswith("_") or isinstance(node.ctx, ast.Store):
                    self.refuse(node, f"attribute {node.attr!r}")
                bases.add(id(node.value))
            elif isinstance(node, ast.keyword) and node.arg is None:
                self.refuse(root, "** argument")
            elif isinstance(node, ast.Constant):
                self.constant(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in SHAPES:
                for part in ast.walk(node):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        self.string(part)
            elif isinstance(node, ast.BinOp):
                self.arithmetic(node)
            elif isinstance(node, ast.Call) and isinstance(getattr(root, "ctx", None), ast.Store) \
                    and not (isinstance(root, ast.Subscript) and self.dialect == "T"
                             and self.namespaced(node.func)):
                self.refuse(node, "a call in an assignment's target")  # Python assigns it
        applied = {id(node.func) for node in ast.walk(root) if isinstance(node, ast.Call)} | \
            {id(node.value) for node in ast.walk(root) if isinstance(node, ast.Subscript)}
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute) and id(node) not in bases:
                value = self.chain(node)
                if node is not root and id(node) not in applied and _endless(value):
                    self.refuse(node, f"{ast.unparse(node)} as a value (only called, indexed "
                                      "or an annotation)")
            elif isinstance(node, ast.Name) and node.id not in self.bound:
                if node.id not in ROOTS:
                    self.refuse(node, f"name {node.id!r} (not bound in the module)")
                if id(node) not in bases:
                    self.refuse(node, f"the namespace {node.id!r} itself as a value")

    def namespaced(self, node: ast.expr) -> bool:
        """An attribute chain from I, R or T (a TIR buffer's index: ``A[T.int64(0)]``)."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in ROOTS and node.id not in self.bound

    def chain(self, node: ast.Attribute) -> Any:
        """An attribute chain: from I, R or T, resolved name by name (see the module
        docstring), its value; from a name the file binds, left to the parser (None)."""
        names = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            names.append(base.attr)
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in ROOTS and base.id not in self.bound):
            return None
        value = self.namespaces[base.id]
        for name in reversed(names):
            if name in DENIED or name in DECORATORS:
                self.refuse(node, f"{base.id}.{name} outside a decorator")
            parent = value
            value = getattr(value, name, None)
            home = value.__name__ if isinstance(value, types.ModuleType) else getattr(
                value, "__module__", None) or type(value).__module__
            if isinstance(value, types.ModuleType):
                if not (isinstance(parent, types.ModuleType) and home.startswith("tvm.relax.op")):
                    self.refuse(node, f"{'.'.join([base.id, *reversed(names)])}: module {home}")
            elif value is None or not isinstance(home, str) or not home.startswith(BUILDERS):
                self.refuse(node, f"{'.'.join([base.id, *reversed(names)])}: not an IR builder")
        if isinstance(value, types.ModuleType):
            self.refuse(node, f"the module {'.'.join([base.id, *reversed(names)])} as a value")
        return value

    def constant(self, node: ast.Constant) -> None:
        value = node.value
        if not (isinstance(value, bool | float | str) or value is None or (
                isinstance(value, int) and value.bit_length() <= INT_BITS)):
            self.refuse(node, f"constant {type(value).__name__} {str(value)[:20]}")

    def string(self, node: ast.Constant) -> None:
        """A string in a shape, which Relax evaluates (``R.Tensor(("n + 1", 4))``): names,
        attributes, numbers and arithmetic only."""
        try:
            parsed = ast.parse(node.value, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # no expression: never evaluated
        for part in ast.walk(parsed):
            if not isinstance(part, SHAPE_NODES) or isinstance(part, ast.Name | ast.Attribute) \
                    and (getattr(part, "id", None) or getattr(part, "attr", "")).startswith("_"):
                self.refuse(node, f"the string {node.value[:40]!r} (TVM may evaluate it)")
            if isinstance(part, ast.BinOp):
                self.arithmetic(part)
            if isinstance(part, ast.Constant) and not isinstance(part.value, int | float):
                self.refuse(node, f"the string {node.value[:40]!r} (TVM may evaluate it)")

    def arithmetic(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Pow):
            self.refuse(node, "** (a power)")
        if isinstance(node.op, ast.LShift | ast.RShift) and _constant_only(node.right) and not (
                isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)
                and node.right.value <= INT_BITS):
            self.refuse(node, "a shift by a computed or large constant")
        if isinstance(node.op, ast.Mult) and any(
                isinstance(side, ast.Tuple | ast.List | ast.Dict) or (
                    isinstance(side, ast.Constant) and isinstance(side.value, str))
                for side in (node.left, node.right)):
            self.refuse(node, "a repeated literal")


def _endless(value: Any) -> bool:
    """An object Python iterates by indexing from 0 until an IndexError that never comes
    (TIR's dtype constructors, ``T.int64``): TVM's parser loops forever where it takes one
    for a shape."""
    kind = type(value)
    return value is not None and not isinstance(value, type | types.FunctionType) and \
        hasattr(kind, "__getitem__") and not hasattr(kind, "__iter__")


def _constant_only(node: ast.expr) -> bool:
    """An expression of literals alone (Python computes it, whatever its size)."""
    return all(isinstance(part, ast.Constant | ast.BinOp | ast.UnaryOp | ast.operator
                          | ast.unaryop) for part in ast.walk(node))


def _is_call(node: ast.expr, function: str, argument: str) -> bool:
    """``function("argument")``, nothing else."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == function and not node.keywords and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == argument)
