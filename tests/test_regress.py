"""The regression gate's machinery (`benchmarks.regress`) on a tiny set: no timings asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import regress
from benchmarks.__main__ import main
from benchmarks.suites import fit_five


def _row(**options) -> regress.Row:
    return regress.Row("tiny/fit-five", fit_five, {"time_limit": 5.0, **options})


def _measured(**changes) -> dict:
    row = {"arena": 12, "status": "optimal", "settled": True, "seconds": 2.0, "peer_seconds": 0.01,
           "ratio": 200.0, "invalid": None}
    return {**row, **changes}


def test_a_row_is_planned_checked_and_timed_against_the_peer():
    pytest.importorskip("omnimalloc")
    now = regress.measure(_row())
    assert now["arena"] == 12 and now["status"] == "optimal" and now["invalid"] is None
    assert now["settled"] and now["peer_seconds"] > 0 and now["ratio"] == pytest.approx(
        now["seconds"] / now["peer_seconds"], rel=0.01)


def test_judge_names_a_grown_arena_a_slower_ratio_and_an_invalid_plan():
    then = _measured()
    assert regress.judge(_measured(), then) == []
    assert regress.judge(_measured(), None) == []  # a new row passes
    assert "arena 12 -> 13" in regress.judge(_measured(arena=13), then)[0]
    assert "time ratio" in regress.judge(_measured(ratio=251.0), then)[0]
    assert regress.judge(_measured(ratio=249.0), then) == []  # within 25 %
    assert regress.judge(_measured(ratio=251.0), then, tolerance=0.5) == []
    fast = _measured(seconds=0.1, ratio=1000.0)  # below the time floor: not judged by time
    assert regress.judge(fast, _measured(seconds=0.05)) == []
    unsettled = {"status": "unknown", "settled": False}  # both ran to their time limit
    assert regress.judge(_measured(ratio=900.0, **unsettled), _measured(**unsettled)) == []
    assert regress.judge(_measured(ratio=900.0, **unsettled), then)  # it settled before
    assert "invalid plan" in regress.judge(_measured(invalid="overlap"), None)[0]


def test_a_failing_row_is_run_again_and_fails_only_if_every_attempt_fails():
    pytest.importorskip("omnimalloc")
    lines = []
    baseline = {"tiny/fit-five": _measured(arena=11)}  # smaller than any plan can be
    results, failures = regress.run([_row()], baseline, retries=1, tolerance=0.25,
                                    progress=lines.append)
    assert failures == {"tiny/fit-five": ["arena 11 -> 12"]}
    assert sum("attempt" in line for line in lines) == 2  # both attempts reported
    results, failures = regress.run([_row()], {"tiny/fit-five": _measured()}, retries=0,
                                    tolerance=10.0, progress=lines.append)
    assert failures == {} and results["tiny/fit-five"]["arena"] == 12


def test_the_command_writes_a_baseline_then_passes_and_fails_against_it(tmp_path, capsys):
    pytest.importorskip("omnimalloc")
    path = tmp_path / "baseline.json"
    chosen = ["--class", "tilings", "--problem", "tiling-100", "--baseline", str(path)]
    assert main(["regress", *chosen, "--write-baseline"]) == 0
    stored = json.loads(path.read_text())
    assert set(stored["rows"]) == {"tilings/tiling-100"}
    assert main(["regress", *chosen, "--tolerance", "1000"]) == 0
    stored["rows"]["tilings/tiling-100"]["arena"] -= 1  # a baseline the plan cannot meet
    path.write_text(json.dumps(stored))
    assert main(["regress", *chosen, "--retries", "0"]) == 1
    assert "FAIL tilings/tiling-100: arena" in capsys.readouterr().out


def test_an_unknown_class_is_refused_with_the_valid_ones():
    with pytest.raises(KeyError, match="valid classes: minimalloc-fit"):
        regress.rows(("tiling",))
    assert {row.key.split("/")[0] for row in regress.rows(("tilings",))} == {"tilings"}


def test_only_new_rows_are_measured_and_added_to_a_baseline(tmp_path, monkeypatch):
    pytest.importorskip("omnimalloc")
    twin = regress.Row("tiny/fit-five-again", fit_five, {"time_limit": 5.0})
    monkeypatch.setitem(regress.CLASSES, "tiny", lambda: [_row(), twin])
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"rows": {"tiny/fit-five": _measured(arena=11)},
                                "machine": {"memplan commit": "before"}}))
    chosen = ["regress", "--class", "tiny", "--baseline", str(path)]
    assert main([*chosen, "--write-baseline", "--only-new"]) == 0
    stored = json.loads(path.read_text())
    assert stored["rows"]["tiny/fit-five"]["arena"] == 11  # kept, not measured again
    assert stored["rows"]["tiny/fit-five-again"]["arena"] == 12
    assert stored["machine"] == {"memplan commit": "before"}
    assert stored["added"][0]["rows"] == ["tiny/fit-five-again"]
