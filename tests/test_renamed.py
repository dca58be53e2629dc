"""Names changed so that one concept has one name: the old ones work for one release, each
with one DeprecationWarning (or one line on stderr for an option), and give the new object."""

from __future__ import annotations

import importlib
import json
import warnings

import pytest

from memplan import Buffer, Problem, Step
from memplan.cli import OK, main
from memplan.errors import ProblemError, renamed_keyword
from memplan.formats import memplan_json

OLD_NAMES = [  # (module, old name, new name)
    ("memplan.registry", "FLOOR", "CEILING"),
    ("memplan.registry", "FLOOR_PAIRS", "CEILING_PAIRS"),
    ("memplan.registry", "FLOOR_SHARE", "CEILING_SHARE"),
    ("memplan.registry", "floor_planner", "ceiling_planner"),
    ("memplan.registry", "floor_fits", "ceiling_fits"),
    ("memplan.sweeps.sweep", "parse_size", "parse_capacity"),
    ("memplan.diagnosis.region_curve", "explain_banks", "explain_regions"),
    ("memplan.diagnosis.region_curve", "BankExplanation", "RegionExplanation"),
]
EXECUTORCH_NAMES = [
    ("memplan.executorch", "BankOverflowError", "RegionOverflowError"),
    ("memplan.executorch", "format_bank_report", "format_region_report"),
    ("memplan.executorch.target_regions", "BankReport", "RegionReport"),
    ("memplan.executorch.target_regions", "BankedAlgorithm", "RegionAlgorithm"),
]


@pytest.mark.parametrize("module,old,new", OLD_NAMES + EXECUTORCH_NAMES)
def test_an_old_name_warns_once_and_is_the_new_object(module, old, new):
    found = importlib.import_module(module)
    expected = getattr(found, new)  # first: what it imports (torch) may warn of its own
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: use {new}") as caught:
        value = getattr(found, old)
    assert len(caught) == 1 and value is expected
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        found.no_such_name  # noqa: B018


def test_an_old_keyword_warns_and_both_at_once_are_refused():
    with pytest.warns(DeprecationWarning, match="banks= is deprecated: use regions="):
        assert renamed_keyword("banks", 3, "regions", None) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_keyword("banks", None, "regions", 4) == 4
    with pytest.raises(ProblemError, match="old name"):
        renamed_keyword("banks", 3, "regions", 4)


def test_the_regions_reads_were_weights():
    """``weights=`` of the region planners and their explanation is ``reads=``: the same
    result, with one warning naming the new keyword."""
    from memplan.deploy.regions import plan_regions
    from memplan.diagnosis.region_curve import explain_regions, fast_peak
    from memplan.problem import Region

    problem = Problem([Buffer("long", 70, 0, 3)] + [Buffer(n, 60, t, t + 1)
                                                    for t, n in enumerate("abc")],
                      regions=[Region("fast", 100, 0.0), Region("slow", None, 1.0)])
    reads = [10, 1, 1, 1]
    new = plan_regions(problem, planner="greedy_by_size", reads=reads)
    with pytest.warns(DeprecationWarning, match=r"plan_regions\(weights=...\) is deprecated: "
                      "use reads=") as caught:
        old = plan_regions(problem, planner="greedy_by_size", weights=reads)
    assert len(caught) == 1 and old.regions.tolist() == new.regions.tolist()
    assert old.stats["cost"] == new.stats["cost"]
    with pytest.warns(DeprecationWarning, match="fast_peak"):
        assert fast_peak(problem, new, weights=reads) == fast_peak(problem, new, reads)
    with pytest.warns(DeprecationWarning, match="explain_regions"):
        assert explain_regions(problem, new, weights=reads, sizes=[128]) == \
            explain_regions(problem, new, reads=reads, sizes=[128])
    with pytest.raises(ProblemError, match="old name"):
        plan_regions(problem, reads=reads, weights=reads)
    from memplan.deploy import regions

    with pytest.warns(DeprecationWarning, match="use checked_reads"):
        assert regions.checked_weights is regions.checked_reads


def test_the_executorch_pass_takes_banks_as_regions():
    from executorch.exir.banked_memory_planning import Bank, TargetMemoryMap

    import memplan.executorch

    target = TargetMemoryMap([Bank("fast", 128, 1), Bank("slow", 1 << 20, 2)])
    with pytest.warns(DeprecationWarning, match="banks= is deprecated"):
        old = memplan.executorch.memory_planning_pass(banks=target, relative_gap=0)
    assert old.algorithm.target is target and old.algorithm.relative_gap == 0
    with pytest.warns(DeprecationWarning, match="banks= is deprecated"):
        assert memplan.executorch.algorithm(banks=target).target is target


def test_explain_takes_banks_as_regions_with_a_warning(capsys, tmp_path):
    steps = [Step("mm", "MatMul", (), ("a",)), Step("out", "Add", ("a",), ("b",))]
    problem = Problem([Buffer("a", 4096, 0, 2), Buffer("b", 4096, 1, 2)], steps=steps)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(memplan_json.problem_to_dict(problem)))
    assert main(["explain", str(path), "--banks", "fast=6KiB,slow", "--json"]) == OK
    out, err = capsys.readouterr()
    assert json.loads(out)["fast"] == "fast"
    assert "--banks is deprecated, use --regions" in err


def test_a_region_reports_old_field_name_warns():
    from memplan.executorch.target_regions import RegionReport

    problem = Problem([Buffer("a", 8, 0, 1)])
    report = RegionReport("graph 0", {}, {}, [0], 0.0, region_problem=problem)
    with pytest.warns(DeprecationWarning, match="banked is deprecated: use region_problem"):
        assert report.banked is problem
