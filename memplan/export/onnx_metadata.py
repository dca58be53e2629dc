"""A plan stored in an ONNX model's ``metadata_props``, so that it travels with the model.

A runtime that loads the model finds the plan next to the graph it belongs
to; no side file can get out of step. Keys written (values are strings, as
``metadata_props`` requires):

- ``memplan.plan``: the memplan plan document as JSON (format
  ``memplan-plan``, see `memplan.frontends.memplan_json`): offsets by tensor
  name, arena size, lower and proven bound, status, planner, and the regions
  and granted scratch sizes when there are any;
- ``memplan.arena_size``: the arena size in bytes, in decimal, for a runtime
  that only needs to reserve the arena.

Writing replaces earlier ``memplan.*`` entries and keeps every other entry.
Steps: parse the model's bytes (never its external data: no path named in
the model is opened), copy it, drop old ``memplan.*`` props, append the two
keys, write the serialised bytes. Cost O(n) plus the model copy. ``onnx`` is
imported when first used (it costs a quarter of a second, which a command that
plans a CSV file need not pay).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from memplan.errors import ProblemError
from memplan.frontends.memplan_json import plan_from_dict, plan_to_dict
from memplan.plan import Plan
from memplan.problem import Problem

if TYPE_CHECKING:
    import onnx

PLAN_KEY = "memplan.plan"
ARENA_KEY = "memplan.arena_size"
_PREFIX = "memplan."


def _model(model: onnx.ModelProto | str | os.PathLike) -> onnx.ModelProto:
    """The model, parsed from its own bytes only: no path named inside it is ever opened."""
    from memplan.frontends.onnx_graph import load_model

    return load_model(model)[0]


def annotate(model: onnx.ModelProto | str | os.PathLike, problem: Problem,
             plan: Plan) -> onnx.ModelProto:
    """A copy of ``model`` whose metadata_props carry ``plan`` (see the module doc)."""
    import onnx

    annotated = onnx.ModelProto()
    annotated.CopyFrom(_model(model))
    kept = [(p.key, p.value) for p in annotated.metadata_props if not p.key.startswith(_PREFIX)]
    del annotated.metadata_props[:]
    entries = kept + [(PLAN_KEY, json.dumps(plan_to_dict(problem, plan))),
                      (ARENA_KEY, str(plan.arena_size))]
    for key, value in entries:
        annotated.metadata_props.add(key=key, value=value)
    return annotated


def read_plan(model: onnx.ModelProto | str | os.PathLike, problem: Problem) -> Plan:
    """The plan stored in ``model`` by `annotate`, for ``problem``."""
    import onnx

    proto = _model(model)
    props = {p.key: p.value for p in proto.metadata_props}
    if PLAN_KEY not in props:
        raise ProblemError(f"the model has no {PLAN_KEY!r} metadata; was it annotated?",
                           file=None if isinstance(model, onnx.ModelProto) else str(model))
    try:
        document = json.loads(props[PLAN_KEY])
    except (ValueError, RecursionError) as error:
        raise ProblemError(f"the {PLAN_KEY!r} metadata is not a plan document ({error})",
                           file=None if isinstance(model, onnx.ModelProto) else str(model)
                           ) from None
    return plan_from_dict(document, problem, source=PLAN_KEY)


def write_annotated(path: str | os.PathLike, model: onnx.ModelProto | str | os.PathLike,
                    problem: Problem, plan: Plan) -> None:
    """Save the annotated model to ``path``: its bytes, weights included as they are.

    Serialised directly (not `onnx.save`, which writes a tensor's external
    data to the location the model names): tensors stored as external data
    keep their references unchanged, and no file other than ``path`` is
    opened or written.
    """
    data = annotate(model, problem, plan).SerializeToString()
    with open(os.fspath(path), "wb") as handle:
        handle.write(data)
