"""Reading a model with the model options of the command line.

``--dim``, ``--alignment`` and the ONNX flags (`memplan.cli.parser.Parents.model`)
say how a model file becomes a `Problem`; ``--reorder`` first searches the
operator order that lowers the peak (ONNX models); ``--capacity`` replaces the
file's own. An ONNX flag given for another kind of model is refused by name,
and the frontend's Python spelling in an error (``dims={'N': ...}``) becomes the
command line's (``--dim N=...``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from memplan import api
from memplan.cli.checks import UsageError
from memplan.cli.parser import ONNX_FLAGS, changed
from memplan.errors import ProblemError
from memplan.onnx.onnx_options import OnnxOptions
from memplan.problem import Problem
from memplan.schedule.operator_order import Reordering, reorder

_DIMS_HINT = re.compile(r"""dims=\{(['"])(.*?)\1: \.\.\.\}""")


def dims(pairs: list[str]) -> dict[str, int]:
    """``--dim NAME=VALUE`` (repeated) as a dict; a value that is no whole number is refused."""
    found = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if not name or not (value.isascii() and value.isdigit()):
            raise UsageError(f"--dim expects NAME=VALUE with a whole number, got {pair!r}")
        found[name] = int(value)
    return found


def onnx_options(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The ONNX frontend options given on the command line (those not at their default)."""
    given = changed(args, OnnxOptions, ONNX_FLAGS)
    if given and path.suffix.lower() != ".onnx":
        flags = ", ".join(("--no-" if default is True else "--") + name.replace("_", "-")
                          for name, default in given.items())
        raise UsageError(f"{path}: {flags}: for ONNX models only")
    return {name: getattr(args, name) for name in given}


def pte_options(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--method``: for ExecuTorch ``.pte`` programs only."""
    method = getattr(args, "method", None)
    if method is None:
        return {}
    if path.suffix.lower() != ".pte":
        raise UsageError(f"{path}: --method: for ExecuTorch .pte programs only")
    return {"method": method}


def load(name: str | None, args: argparse.Namespace, *, own_capacity: bool = True) -> Problem:
    """The model ``name`` (None: the bundled one) with the model options; ``--capacity``
    becomes its capacity unless ``own_capacity`` is False (models sharing one arena)."""
    path = Path(name) if name is not None else api.default_model()
    try:
        if getattr(args, "reorder", None):
            problem = _reorder(path, args).problem
        else:
            problem = api.load(path, dims=dims(args.dim), alignment=args.alignment,
                               **onnx_options(path, args), **pte_options(path, args))
    except ProblemError as error:  # the frontend speaks Python: dims={'N': ...}, strict=False
        raise ProblemError(_DIMS_HINT.sub(r"--dim \2=...", str(error)).replace(
            "from_onnx(..., strict=False)", "--no-strict")) from None
    if not own_capacity or not hasattr(args, "capacity"):  # the file's capacity, if any
        return problem
    return problem.replace(capacity=args.capacity)


def _reorder(path: Path, args: argparse.Namespace) -> Reordering:
    """``--reorder``: the model in its best operator order found (kept in ``args.reordering``)."""
    if path.suffix.lower() != ".onnx":
        raise UsageError(f"{path}: --reorder: for ONNX models only")
    args.reordering = reorder(path, method=args.reorder_method,
                              time_limit=args.reorder_time_limit,
                              seed=getattr(args, "seed", 0), dims=dims(args.dim),
                              alignment=args.alignment, **onnx_options(path, args))
    return args.reordering


def all_model_options(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The model options of the command line, all of them (defaults filled), as a plan file
    stores them."""
    from memplan.onnx.prove import model_options

    return model_options(dims=dims(args.dim), alignment=args.alignment,
                         **onnx_options(path, args))
