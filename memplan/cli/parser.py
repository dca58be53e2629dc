"""The options several commands share, and options built from the options dataclasses.

Every command is one module with ``add_command(sub, shared)`` and ``run(args)``;
``shared`` is `Parents`, the argparse parents a command takes what it needs from:

- ``common``: ``--debug`` (every command);
- ``model``: how a model file becomes a problem (``--dim``, ``--alignment``, the
  ONNX flags of `memplan.onnx.onnx_options.OnnxOptions`);
- ``reordering``: ``--reorder`` and its method and time limit (ONNX models);
- ``capacity``: ``--capacity``.

`add_dataclass_options` turns a dataclass of options (`memplan.api.SolveOptions`,
`memplan.solver.exact_options.ExactOptions`, ...) into one option per field, the
field's metadata help as its help, so that the library and the command line say
the same thing with the same default. Every value goes through `memplan.cli.checks`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, NamedTuple

from memplan.cli import checks
from memplan.formats.readers import READERS
from memplan.onnx.onnx_options import WEIGHT_MODES, OnnxOptions
from memplan.options import option_help
from memplan.schedule.operator_order import METHODS

ONNX_FLAGS = ("inplace", "concat_inplace", "weights", "strict")  # OnnxOptions on the CLI
_KINDS = {".onnx": "ONNX", ".tflite": "TFLite", ".pte": "ExecuTorch .pte", ".py": "Relax TVMScript",
          ".csv": "MiniMalloc CSV", ".json": "memplan JSON"}
MODEL_KINDS = ", ".join(_KINDS.get(s, s) for s in READERS[:-1]) + \
    f" or {_KINDS.get(READERS[-1], READERS[-1])}"  # what the frontends read, for the help
FIELD_TYPES = {"time_limit": checks.seconds, "heuristic_time_limit": checks.seconds,
               "workers": checks.count, "threads": checks.count, "gap": checks.gap,
               "alignment": checks.size}  # by field name: memplan.limits' rules


SOLVE_RENAMED = {"threads": "--workers", "planner": "--heuristic"}  # SolveOptions' old flags


class Parents(NamedTuple):
    """The argparse parents commands share (see the module doc)."""

    common: argparse.ArgumentParser
    model: argparse.ArgumentParser
    reordering: argparse.ArgumentParser
    capacity: argparse.ArgumentParser


def _optional_number(kind: type):
    """An argparse type: a number, or ``none`` for no limit."""
    def parse(text: str):
        if text.lower() in ("none", "inf", "unlimited"):
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") \
                from None
    parse.__name__ = kind.__name__
    return parse


def add_dataclass_options(parser: argparse._ActionsContainer, cls: type, *,
                          only: tuple[str, ...] | None = None,
                          metavars: dict[str, str] | None = None,
                          choices: dict[str, tuple[str, ...]] | None = None,
                          flags: dict[str, str | tuple[str, ...]] | None = None,
                          renamed: dict[str, str] | None = None,
                          types: dict[str, Callable[[str], Any]] | None = None) -> None:
    """One option per field of the dataclass ``cls`` (or the fields ``only``); the help is
    the field's ``metadata["help"]`` (`memplan.options.option`).

    A bool field that defaults to True becomes ``--no-NAME``, one that
    defaults to False ``--NAME``; ``X | None`` fields accept ``none``. ``flags``
    names a field's option where the command line's word differs from the
    library's (``{"out": ("-o", "--output")}``: one name per concept across
    commands; a tuple for several, ``("-o", "--output")``); ``renamed`` keeps a
    field's old option for one release (`add_deprecated`); ``types`` parses a field's
    text where its type alone does not say how (``"1,2,4"``: a tuple of ints).
    """
    for field in fields(cls):
        if only is not None and field.name not in only:
            continue
        flag = (flags or {}).get(field.name, "--" + field.name.replace("_", "-"))
        names = (flag,) if isinstance(flag, str) else tuple(flag)
        default = field.default if field.default is not MISSING else None
        comment = option_help(field).replace("%", "%%")  # argparse formats help with %
        if field.type == "bool":
            parser.add_argument(*[n.replace("--", "--no-") for n in names] if default else names,
                                dest=field.name, action="store_false" if default else
                                "store_true",
                                help=checks.negated_help(comment) if default else comment)
            continue
        kind = {"int": int, "float": float}.get(field.type.split(" |")[0], str)  # tuples: "a,b"
        check = FIELD_TYPES.get(field.name)
        action = parser.add_argument(
            *names, dest=field.name, default=default,
            type=(types or {}).get(field.name) or (check(names[-1]) if check else
                                                   _optional_number(kind) if "None" in
                                                   field.type else kind),
            choices=(choices or {}).get(field.name),
            metavar=None if field.name in (choices or {}) else
            (metavars or {}).get(field.name, kind.__name__.upper()),
            help=comment if default is None else f"{comment} (default: "
            f"{','.join(default) if isinstance(default, tuple) else default})")
        if field.name in (renamed or {}):
            old = renamed[field.name]
            add_deprecated(parser, old, action, type=check(old) if check else action.type)


class _Deprecated(argparse.Action):
    """An old spelling of an option: it sets what the new one sets, after one line on
    stderr naming the new spelling."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new} "
              f"(the old spelling goes in the next release)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated(parser: argparse._ActionsContainer, old: str, new: argparse.Action,
                   **given: Any) -> None:
    """Accept the option ``old`` for one release as the option ``new``: the same
    destination and values, left out of the help, one deprecation line when used."""
    settings = dict(type=new.type, choices=new.choices, metavar=new.metavar, nargs=new.nargs)
    parser.add_argument(old, action=_Deprecated, new=new.option_strings[-1], dest=new.dest,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                        **{**settings, **given})


def is_deprecated(action: argparse.Action) -> bool:
    """Whether ``action`` is an old spelling kept for one release (`add_deprecated`)."""
    return isinstance(action, _Deprecated)


def options_of(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The fields of the dataclass ``cls`` as the command line set them."""
    return {f.name: getattr(args, f.name) for f in fields(cls)}


def changed(args: argparse.Namespace, cls: type, names: tuple[str, ...]) -> dict[str, Any]:
    """The defaults of the fields ``names`` of ``cls`` that the command line changed."""
    return {f.name: f.default for f in fields(cls)
            if f.name in names and getattr(args, f.name) != f.default}


def parents() -> Parents:
    """The option groups several commands share (see the module doc)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    model_parser = argparse.ArgumentParser(add_help=False)
    model = model_parser.add_argument_group("model options")
    model.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                       help="bind a symbolic ONNX dimension (repeatable)")
    model.add_argument("--alignment", type=checks.size("--alignment"), metavar="BYTES",
                       help="align every offset to this many bytes (64, 4KiB)")
    model.add_argument("--method", metavar="NAME",
                       help="the method of an ExecuTorch .pte program (default: forward, or "
                            "the one method with a memory plan)")
    add_dataclass_options(model, OnnxOptions, only=ONNX_FLAGS, choices={"weights": WEIGHT_MODES})
    reordering = argparse.ArgumentParser(add_help=False)
    order = reordering.add_argument_group("operator order (ONNX models)")
    order.add_argument("--reorder", action="store_true",
                       help="choose the operator order that lowers the peak, then plan it; "
                            "-o model.onnx writes the reordered model")
    order.add_argument("--reorder-method", choices=METHODS, default="fast",
                       help="fast: list scheduling and local search (default); exact: CP-SAT "
                            "over order and layout, warm-started by fast")
    order.add_argument("--reorder-time-limit", default=5.0, metavar="S",
                       type=checks.seconds("--reorder-time-limit", unlimited=False),
                       help="seconds for the order search (default 5)")
    capacity = argparse.ArgumentParser(add_help=False)
    capacity.add_argument_group("problem options").add_argument(
        "--capacity", type=checks.capacity("--capacity"), default=argparse.SUPPRESS,
        metavar="BYTES",
        help="fit under this many bytes (4096, 512KiB, 1MiB; 'none': minimise, ignoring a "
             "capacity the file gives)")
    return Parents(common, model_parser, reordering, capacity)


def add_input_seed(parser: argparse._ActionsContainer, what: str = "--prove's") -> argparse.Action:
    """``--input-seed``: the seed of a proof's random inputs (``--seed`` seeds planners)."""
    return parser.add_argument("--input-seed", type=int, default=0, metavar="N",
                               help=f"seed of {what} random inputs (default: 0)")
