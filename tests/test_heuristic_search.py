"""`benchmarks.heuristic_search`'s command lines and process measure: no timings asserted."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import heuristic_search
from benchmarks.suites import REPO
from benchmarks.traces import TRACES


def test_heuristics_alone_or_the_whole_pipeline():
    alone, _ = heuristic_search.command("memplan", Path("p.csv"), Path("o.csv"), 5.0)
    whole, checkout = heuristic_search.command("memplan", Path("p.csv"), Path("o.csv"), 5.0,
                                               pipeline=True)
    assert "--no-exact" in alone and "--heuristic-time-limit" in alone
    assert "--no-exact" not in whole and whole[whole.index("--time-limit") + 1] == "5"
    assert checkout == REPO


def test_a_process_is_timed_and_its_peak_memory_read():
    seconds, megabytes, output = heuristic_search.timed(
        [sys.executable, "-c", "block = bytearray(64 << 20); block[::4096] = b'x' * 16384; "
                               "print(len(block))"], REPO)
    assert seconds > 0 and megabytes >= 64 and output == f"{64 << 20}\n"


def test_the_trace_suite_picks_a_trace_by_name_and_builds_it_alike():
    names = [name for name, _ in heuristic_search.problems("traces", ("original",),
                                                            ("training-10k-s1",))]
    assert names == ["training-10k-s1/original"]
    assert TRACES["training-10k-s1"]().sizes.tolist() == TRACES["training-10k-s1"]().sizes.tolist()
