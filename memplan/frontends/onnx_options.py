"""How an ONNX model becomes a problem: `OnnxOptions`, importable without ``onnx``.

The command line builds its flags from these options on every call; keeping
them apart from the frontend (`memplan.frontends.onnx`) spares a plan of a
CSV or JSON file the import of ``onnx`` (a sixth of the CLI's start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
        if self.weights not in WEIGHT_MODES:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_MODES)}, "
                             f"got {self.weights!r}")
        if self.alignment < 1:
            raise ValueError(f"alignment must be >= 1, got {self.alignment}")
