"""Prove a plan file on its model: run the model in one arena at that plan's very offsets.

`memplan.validate` checks a plan against a problem, and `memplan.onnx.onnx_arena`
checks that the problem tells the truth about the model. A user deploying a
plan needs both for *their* plan file, the one ``memplan solve -o plan.json``
wrote (or their own tool did), under the model options it was planned with:
an alignment, ``--no-inplace`` or ``--weights region`` change the buffers,
so a plan proven under other options proves nothing.

Steps (`prove`):

- read the plan file (memplan JSON: ``{"problem": ..., "plan": ...}`` as
  ``memplan solve -o`` writes it, or a bare plan); the model options it was
  planned with are in the plan's ``stats["model_options"]`` (`with_model_options`
  puts them there); options given by the caller must agree with them;
- rebuild the problem from the model with those options; when the file holds
  its problem too, every buffer must match it (id, size, lifetime, alignment,
  regions), else the plan was made for another model or other options;
- check the plan with the validator, then run the model inside the plan's
  arena (`memplan.onnx.onnx_arena`, onnxruntime by default) and compare every
  graph output bit for bit with a normal run (the same node sessions outside
  the arena); a run of the whole model is shown beside it, with its largest
  difference, apart from the verdict.

A plan is proven when the validator finds nothing and the arena run corrupts
nothing and reproduces every output bit for bit. Cost: that of the arena run
(one run of the model node by node, twice) plus the validator's sweep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from memplan.errors import ProblemError
from memplan.formats.memplan_json import plan_from_dict
from memplan.onnx import BACKENDS
from memplan.onnx.onnx import OnnxOptions, from_onnx
from memplan.onnx.onnx_arena import ArenaReport, arena_text, check_plan_on_model
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.validate import Violation, validate

MODEL_OPTIONS = tuple(f.name for f in fields(OnnxOptions) if f.name != "name")


def model_options(**given: Any) -> dict[str, Any]:
    """Every ONNX frontend option (`OnnxOptions` but ``name``), defaults filled, as JSON."""
    unknown = set(given) - set(MODEL_OPTIONS)
    if unknown:
        raise ProblemError(f"unknown model option {sorted(unknown)[0]!r}; valid options: "
                           f"{', '.join(MODEL_OPTIONS)}")
    try:
        options = OnnxOptions(**{k: v for k, v in given.items() if v is not None})
    except (TypeError, ValueError) as error:
        raise ProblemError(f"model options: {error}") from None
    values = {name: getattr(options, name) for name in MODEL_OPTIONS}
    values["dims"] = dict(values["dims"])
    return values


def with_model_options(plan: Plan, options: Mapping[str, Any]) -> Plan:
    """``plan`` remembering the model options it was planned with (in its ``stats``)."""
    return replace(plan, stats={**plan.stats, "model_options": model_options(**options)})


@dataclass
class Proof:
    """What proving one plan file on one model showed."""

    model: str
    plan_file: str
    options: dict[str, Any]  # the model options the plan was planned (and is proven) with
    problem: Problem
    plan: Plan
    violations: list[Violation]  # what the validator found
    report: ArenaReport  # the arena run
    backend: str = "onnxruntime"
    notes: list[str] = field(default_factory=list)  # e.g. the file stores no model options

    @property
    def ok(self) -> bool:
        return not self.violations and self.report.ok

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON: per output, bitwise agreement and closeness (None: random)."""
        report = self.report
        return {"model": self.model, "plan": self.plan_file, "proven": self.ok,
                "model_options": self.options, "backend": self.backend,
                "arena_bytes": report.arena_bytes, "notes": self.notes,
                "violations": [str(v) for v in self.violations],
                "corruptions": [str(c) for c in report.corruptions],
                "outputs": {name: {"bitwise": report.bitwise(name), "close": report.close(name),
                                   "whole_model_difference": report.largest_difference(name)}
                            for name in report.normal}}

    def lines(self) -> list[str]:
        """The verdict, then one line per output (and what went wrong)."""
        verdict = "PROVEN" if self.ok else "MISMATCH"
        shown = ", ".join(f"{k}={v}" for k, v in self.options.items() if k != "dims")
        dims = ", ".join(f"{k}={v}" for k, v in self.options["dims"].items())
        lines = [f"{verdict}: {self.plan_file} on {self.model} ({len(self.problem)} buffers, "
                 f"arena {arena_text(self.report.arena_bytes)}, {self.backend})",
                 f"model options: {shown}" + (f", dims {dims}" if dims else ""),
                 *self.notes]
        if self.violations:
            lines.append(f"the validator finds {len(self.violations)} violations: "
                         + "; ".join(str(v) for v in self.violations[:3]))
        lines += [str(c) for c in self.report.corruptions[:10]]
        if len(self.report.corruptions) > 10:
            lines.append(f"... and {len(self.report.corruptions) - 10} more corrupted reads")
        lines += ["output " + line for line in self.report.output_lines()]
        lines += ["whole-model run (apart from the verdict), output " + line
                  for line in self.report.whole_model_lines()]
        return lines


def read_plan_file(path: str | os.PathLike) -> tuple[dict, dict | None, dict | None]:
    """(plan document, problem document or None, stored model options or None) of a file."""
    source = str(path)
    try:
        with open(path) as handle:
            document = json.load(handle)
    except OSError as error:
        raise ProblemError(f"cannot read: {error.strerror}", file=source) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ProblemError(f"not a memplan JSON plan ({error})", file=source) from None
    if not isinstance(document, dict):
        raise ProblemError("not a memplan JSON plan (expected an object)", file=source)
    problem = document.get("problem") if "plan" in document else None
    plan = document.get("plan", document)
    if not isinstance(plan, dict) or plan.get("format") != "memplan-plan":
        raise ProblemError("not a memplan plan (expected \"format\": \"memplan-plan\"; "
                           "memplan solve MODEL -o plan.json writes one)", file=source)
    stats = plan.get("stats") if isinstance(plan.get("stats"), dict) else {}
    stored = stats.get("model_options", plan.get("model_options",
                                                 document.get("model_options")))
    if stored is not None and not isinstance(stored, dict):
        raise ProblemError(f"model_options: expected an object, got {stored!r}", file=source)
    return plan, problem if isinstance(problem, dict) else None, stored


def _stored_options(stored: dict, source: str) -> dict[str, Any]:
    try:
        return model_options(**stored)
    except ProblemError as error:
        raise ProblemError(f"stats.model_options: {error.reason}", file=source) from None


def _same_buffers(problem: Problem, stored: dict, source: str) -> None:
    """The problem the file holds must be the one the model gives under these options."""
    from memplan.formats.memplan_json import problem_from_dict

    theirs = problem_from_dict(stored, source=source)
    if set(theirs.ids) != set(problem.ids):
        missing = sorted(set(problem.ids) - set(theirs.ids))[:3]
        extra = sorted(set(theirs.ids) - set(problem.ids))[:3]
        raise ProblemError(f"the plan was made for another model or other model options: "
                           f"buffers of the model not in the file: {missing}, in the file but "
                           f"not in the model: {extra}", file=source)
    for mine in problem.buffers:
        other = theirs.buffer(theirs.index(mine.id))
        for what in ("size", "start", "end", "alignment", "regions"):
            if getattr(mine, what) != getattr(other, what):
                raise ProblemError(f"the plan was made for another model or other model "
                                   f"options: buffer {mine.id!r} has {what} "
                                   f"{getattr(other, what)} in the file, "
                                   f"{getattr(mine, what)} in the model", file=source)


def prove(model: str | os.PathLike, plan_file: str | os.PathLike, *,
          options: Mapping[str, Any] | None = None, backend: str = "onnxruntime",
          seed: int = 0) -> Proof:
    """Run ``model`` in one arena at the offsets of ``plan_file``; see the module docstring.

    ``options`` are model options the caller gives (`MODEL_OPTIONS`): they
    must agree with those the file stores, and are used when it stores none
    (the frontend's defaults otherwise). Raises `ProblemError` for bad input:
    an unreadable file, options that disagree, a plan of another model.
    """
    if backend not in BACKENDS:
        raise ProblemError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    source = str(plan_file)
    document, stored_problem, stored = read_plan_file(plan_file)
    given = model_options(**(options or {}))
    notes = []
    if stored is None:
        chosen = given
        notes.append("the plan file stores no model options: proven with those given "
                     "(or the defaults)")
    else:
        chosen = _stored_options(stored, source)
        for name in options or {}:
            if given[name] != chosen[name]:
                raise ProblemError(f"the plan was planned with {name}={chosen[name]!r}, not "
                                   f"{given[name]!r}: drop the option, or plan again",
                                   file=source)
    problem = from_onnx(model, **chosen)
    if stored_problem is not None:
        _same_buffers(problem, stored_problem, source)
    plan = plan_from_dict(document, problem, source=source)
    proof = prove_plan(model, problem, plan, chosen, backend=backend, seed=seed,
                       plan_file=source)
    proof.notes += notes
    return proof


def prove_plan(model: str | os.PathLike, problem: Problem, plan: Plan,
               options: Mapping[str, Any], *, backend: str = "onnxruntime", seed: int = 0,
               plan_file: str = "the plan") -> Proof:
    """Prove ``plan`` of ``problem``, which ``model`` gave under the model ``options``."""
    chosen = model_options(**options)
    violations = validate(problem, plan)
    report = check_plan_on_model(model, problem, plan, dims=chosen["dims"], backend=backend,
                                 seed=seed)
    return Proof(str(model), plan_file, chosen, problem, plan, violations, report, backend)
