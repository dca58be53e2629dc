"""Tensors an ExecuTorch program computes from constants at every run: named and measured.

A linear layer without a delegate transposes its weight at every call
(``permute_copy``): `memplan.explain` names that tensor, on the edge program and
on the ``.pte``, with the bound without it, which is the arena of the program
whose constants were folded at export (``constant_prop_pass``,
`benchmarks.executorch_models.fold_constants`, as docs/how-to/executorch.md shows).
A weight stored the way it is read is no finding.
Needs the ``executorch`` extra.
"""

from __future__ import annotations

import pytest
import torch
from executorch.exir import to_edge, to_edge_transform_and_lower

import memplan
from benchmarks.executorch_models import arena_bytes, fold_constants, run
from memplan.cli import OK, main

WEIGHT_BYTES = 64 * 512 * 4


class TransposedAtRunTime(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64, 512)

    def forward(self, x):
        return torch.relu(self.linear(x))


class StoredAsRead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 512))

    def forward(self, x):
        return torch.relu(x @ self.weight)


@pytest.fixture(scope="module")
def exported():
    torch.manual_seed(0)
    x = torch.randn(2, 64)
    with torch.no_grad():
        return {name: torch.export.export(module.eval().requires_grad_(False), (x,))
                for name, module in (("transposed", TransposedAtRunTime()),
                                     ("stored", StoredAsRead()))}, x


def test_a_weight_transposed_at_run_time_is_named_with_what_folding_saves(exported, tmp_path):
    programs, x = exported
    edge = to_edge(programs["transposed"])
    program = edge.to_executorch()
    path = tmp_path / "linear.pte"
    path.write_bytes(program.buffer)
    folded = to_edge_transform_and_lower(programs["transposed"],
                                         transform_passes=fold_constants()).to_executorch()
    for problem in (memplan.from_executorch(edge), memplan.from_executorch(path)):
        found = memplan.explain(problem, time_limit=5)
        (folding,) = found.folding
        assert folding.size == WEIGHT_BYTES and folding.buffers == (folding.tensor,)
        assert [o.op.replace("::", ".") for o in folding.operators] == ["aten.permute_copy.out"]
        assert len(folding.constants) == 1 and folding.kept == ()
        assert found.lower_bound == arena_bytes(program)
        assert folding.bound == found.folded_bound == arena_bytes(folded)  # measured
        assert folding.saves == arena_bytes(program) - arena_bytes(folded) > WEIGHT_BYTES * 0.9
    assert torch.equal(run(program, [(x,)])[0][0], run(folded, [(x,)])[0][0])
    assert main(["explain", str(path), "--planner", "none", "--time-limit", "5"]) == OK


def test_a_weight_stored_as_it_is_read_is_no_finding(exported, capsys):
    programs, _ = exported
    found = memplan.explain(memplan.from_executorch(to_edge(programs["stored"])), time_limit=5)
    assert found.folding == () and found.folded_bound is None
    assert "constants" not in str(found)
