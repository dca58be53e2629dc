"""Architectures of the ``transformers`` library as torch's exporters write them: each is
planned without ``dims``, at or above its bound, and proven; a planted overlap is caught."""

from __future__ import annotations

import json

import pytest

from benchmarks.onnx_transformers import corpus_row, export
from memplan.cli import FAILED, OK, main

# a class token (CLIP), a decoder given a tokenizer's mask (refused before symbolic shape
# inference), windowed attention (Swin), and the dynamo exporter
CASES = [("clip-vision", "legacy", False), ("mistral", "legacy", True),
         ("swin", "legacy", False), ("bert", "dynamo", True)]


@pytest.mark.parametrize("name, exporter, mask", CASES)
def test_an_exported_architecture_is_planned_and_proven(name, exporter, mask, tmp_path):
    row = corpus_row(name, exporter, mask, tmp_path, time_limit=1.0)
    assert not row.apart and not row.refused, row
    assert row.bound <= row.memplan <= row.greedy_no_inplace
    assert row.proven, row.verdict


def test_a_planted_overlap_in_an_exported_model_is_caught(capsys, tmp_path):
    path = tmp_path / "mistral.onnx"
    export("mistral", "legacy", True, path)
    plan = tmp_path / "plan.json"
    assert main(["solve", str(path), "--quiet", "-o", str(plan), "--time-limit", "1"]) == OK
    document = json.loads(plan.read_text())
    problem, offsets = document["problem"], document["plan"]["offsets"]
    buffers = {b["id"]: b for b in problem["buffers"]}
    # the largest activation, and one written while it still has a reader to come, apart
    # from it in the plan, moved onto it
    alive = sorted((b for b in buffers.values() if b.get("kind", "activation") == "activation"),
                   key=lambda b: -b["size"])

    def apart(a, b):
        return offsets[a["id"]] + a["size"] <= offsets[b["id"]] or \
            offsets[b["id"]] + b["size"] <= offsets[a["id"]]

    first, second = next((a, b) for a in alive for b in alive
                         if a["start"] < b["start"] < a["end"] - 1 and apart(a, b))
    offsets[second["id"]] = offsets[first["id"]]
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(document))
    assert main(["prove", str(path), str(planted)]) == FAILED
    out = capsys.readouterr().out
    assert out.startswith("MISMATCH") and f"{first['id']!r} read by" in out, out
