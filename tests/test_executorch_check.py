"""memplan's storage check of a planned ExecuTorch graph against ExecuTorch's own Verifier.

One small program (ExecuTorch's llama example, reinplaced so that some specs live in
another's storage) is lowered with greedy; its plan is then corrupted in seeded ways
(offsets moved or swapped, mem_ids swapped, memory objects shared or split, lifetimes
stretched, values unset) and both checks must give the same verdict on every one.
"""

from __future__ import annotations

import copy
import random
import time

import pytest
from executorch.exir import ExecutorchBackendConfig
from executorch.exir.dialects._ops import ops
from executorch.exir.memory_planning import Verifier, collect_specs_from_nodes

import memplan.executorch
from benchmarks import executorch_zoo as zoo
from benchmarks.executorch_models import export, lower
from memplan import InvalidPlanError, ProblemError
from memplan.executorch import spec_planner
from memplan.executorch.spec_check import check_storage

CORRUPTIONS = ("offset of another", "offset moved", "mem_ids swapped", "object shared",
               "object of its own", "lifetime stretched", "offsets swapped", "offset unset",
               "object unset", "lifetime shifted")


@pytest.fixture(scope="module")
def planned():
    """A greedy-planned graph with storage-backed specs, and the specs the Verifier checks."""
    edge = export(zoo.llama(64, 1, 8, vocab=64))
    extra = frozenset({ops.edge.dim_order_ops._clone_dim_order.default})
    program = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(
        run_reinplace_pass=True, reinplace_extra_ops=extra))
    exported = program.exported_program()
    graph, signature = exported.graph_module, exported.graph_signature
    specs = list(collect_specs_from_nodes(graph.graph.nodes, signature, do_assertion=False,
                                          ignore_out_var_node=False))
    assert any(spec.storage_base is not None for spec in specs)
    return edge, graph, signature, specs


def _corrupt(kind: str, spec, other, rng: random.Random) -> None:
    if kind == "offset of another":
        spec.mem_offset = other.mem_offset
    elif kind == "offset moved":
        spec.mem_offset = max(0, spec.mem_offset + rng.choice([-64, -16, 16, 64]))
    elif kind == "mem_ids swapped":  # both to another arena, the second at the first's bytes
        spec.mem_id = other.mem_id = 2 if spec.mem_id == 1 else 1
        other.mem_offset = spec.mem_offset
    elif kind == "object shared":
        spec.mem_obj_id = other.mem_obj_id
    elif kind == "object of its own":
        spec.mem_obj_id = 10 ** 6
    elif kind == "lifetime stretched":
        spec.lifetime = [min(spec.lifetime[0], other.lifetime[0]),
                         max(spec.lifetime[1], other.lifetime[1])]
    elif kind == "offsets swapped":
        spec.mem_offset, other.mem_offset = other.mem_offset, spec.mem_offset
    elif kind == "offset unset":
        spec.mem_offset = None
    elif kind == "object unset":
        spec.mem_obj_id = None
    else:
        spec.lifetime = [spec.lifetime[0] + 3, spec.lifetime[1] + 3]


def _verdicts(graph, signature, specs) -> tuple[bool, bool]:
    """(ExecuTorch's Verifier accepts, memplan's sweep accepts)."""
    try:
        Verifier(graph, True, True, True, signature).verify_storage_reuse()
        theirs = True
    except Exception:  # noqa: BLE001 (InternalError or AssertionError)
        theirs = False
    try:
        check_storage(specs)
        mine = True
    except InvalidPlanError:
        mine = False
    return theirs, mine


def test_the_sweep_rejects_what_the_verifier_rejects_and_accepts_the_rest(planned):
    _, graph, signature, specs = planned
    assert _verdicts(graph, signature, specs) == (True, True)  # greedy's own plan
    rng = random.Random(0)
    seen = {kind: set() for kind in CORRUPTIONS}
    for trial in range(400):
        saved = [(s.mem_id, s.mem_offset, s.mem_obj_id, list(s.lifetime)) for s in specs]
        kinds = [CORRUPTIONS[trial % len(CORRUPTIONS)]] + rng.sample(CORRUPTIONS, trial % 2)
        for kind in kinds:
            _corrupt(kind, rng.choice(specs), rng.choice(specs), rng)
        theirs, mine = _verdicts(graph, signature, specs)
        assert theirs == mine, f"trial {trial}: {kinds}"
        seen[kinds[0]].add(theirs)
        for spec, (mem_id, offset, obj, life) in zip(specs, saved, strict=True):
            spec.mem_id, spec.mem_offset, spec.mem_obj_id, spec.lifetime = \
                mem_id, offset, obj, life
    assert [kind for kind, verdicts in seen.items() if False not in verdicts] == []
    assert sum(True in verdicts for verdicts in seen.values()) >= 5  # and many accepted


def test_a_spec_stored_in_another_may_share_its_bytes_a_sibling_may_not(planned):
    _, graph, signature, specs = planned
    inner = next(spec for spec in specs if spec.storage_base is not None)
    base = inner.storage_base
    assert inner.mem_offset == base.mem_offset + inner.storage_base_offset
    check_storage(specs)  # base and inner live together on shared bytes: allowed
    rivals = [s for s in specs if s is not inner and s is not base and s.allocated_memory
              and s.mem_id == base.mem_id and s.lifetime[0] <= base.lifetime[1]
              and base.lifetime[0] <= s.lifetime[1]]
    saved = rivals[0].mem_offset, rivals[0].mem_obj_id
    rivals[0].mem_offset, rivals[0].mem_obj_id = inner.mem_offset, inner.mem_obj_id
    try:
        assert _verdicts(graph, signature, specs) == (False, False)
        with pytest.raises(InvalidPlanError, match="share bytes in mem_id 1 while both live"):
            check_storage(specs)
    finally:
        rivals[0].mem_offset, rivals[0].mem_obj_id = saved


def test_the_default_pass_runs_the_sweep_not_the_verifier(planned, monkeypatch):
    edge = planned[0]
    calls = []
    original = Verifier.verify_storage_reuse
    monkeypatch.setattr(Verifier, "verify_storage_reuse",
                        lambda self, *a: calls.append(1) or original(self, *a))
    default = memplan.executorch.memory_planning_pass(time_limit=2)
    lower(edge, default)
    assert calls == [] and default.reports[-1].verify_seconds > 0
    lower(edge, memplan.executorch.memory_planning_pass(time_limit=2, verify="executorch"))
    assert calls == [1]
    with pytest.raises(ProblemError, match="verify must be"):
        memplan.executorch.memory_planning_pass(verify="pairs")


def test_verify_seconds_count_the_algorithms_check_with_a_fallback(planned, monkeypatch):
    """With ``fallback="greedy"`` the algorithm checks its own plan (here made to take
    0.2 s); the pass's later input/output check adds to its seconds, not replaces them."""
    def slow(*args, **kwargs):
        time.sleep(0.2)
        return check_storage(*args, **kwargs)

    monkeypatch.setattr(spec_planner, "check_storage", slow)
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=2, fallback="greedy")
    lower(planned[0], planning_pass)
    report = planning_pass.reports[-1]
    assert report.fallback is None and report.verify_seconds >= 0.2
