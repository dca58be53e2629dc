"""How an ONNX model becomes a problem: `OnnxOptions`, importable without ``onnx``.

The command line builds its flags from these options on every call; keeping
them apart from the frontend (`memplan.onnx.onnx`) spares a plan of a
CSV or JSON file the import of ``onnx`` (a sixth of the CLI's start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memplan.errors import ProblemError
from memplan.limits import describe, problem_with
from memplan.options import option

WEIGHT_MODES = ("exclude", "region")


@dataclass(frozen=True)
class OnnxOptions:
    """How `from_onnx` turns a model into a problem; defaults are the usual choice."""

    dims: Mapping[str, int] = option(help="values of symbolic dims: {'batch': 1}",
                                     default_factory=dict)
    alignment: int = option(1, "every buffer's offset is a multiple of this many bytes")
    inplace: bool = option(True, "offer element-wise outputs an optional alias over a dying "
                           "input of their shape and element type")
    concat_inplace: bool = option(False, "Concat inputs written straight into the output's slices")
    weights: str = option("exclude", "'exclude': not planned; 'region': planned in region "
                          "'weights'")
    strict: bool = option(True, "refuse a model whose shape inference finds an inconsistency")
    name: str | None = option(None, "the problem's name; default: the file's or the graph's name")

    def __post_init__(self):
        """Each option of the right kind, or a `ProblemError` (a `ValueError`) naming it
        (never a Python comparison error: the values may come from a plan file's
        ``model_options``)."""
        if not isinstance(self.dims, Mapping) or not all(
                isinstance(name, str) and problem_with(value) is None
                for name, value in self.dims.items()):
            raise ProblemError(f"dims must map dimension names to whole numbers >= 0, got "
                               f"{describe(self.dims)}")
        reason = problem_with(self.alignment, lowest=1)
        if reason is not None:
            raise ProblemError(f"alignment {reason}")
        for flag in ("inplace", "concat_inplace", "strict"):
            if not isinstance(getattr(self, flag), bool):
                raise ProblemError(f"{flag} must be true or false, got "
                                   f"{describe(getattr(self, flag))}")
        if not isinstance(self.weights, str) or self.weights not in WEIGHT_MODES:
            raise ProblemError(f"weights must be one of {', '.join(WEIGHT_MODES)}, "
                               f"got {describe(self.weights)}")
        if self.name is not None and not isinstance(self.name, str):
            raise ProblemError(f"name must be a text, got {describe(self.name)}")
