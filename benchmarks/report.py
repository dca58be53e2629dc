"""Tables out of the runner's rows: CSV, markdown, and the generated sections of BENCHMARKS.md.

BENCHMARKS.md mixes hand-written context with generated blocks. A generated
block sits between two markers and is replaced whole by the next run of the
command it names::

    <!-- generated: minimalloc-fit (python -m benchmarks run ... --section minimalloc-fit) -->
    ...table...
    <!-- end generated: minimalloc-fit -->

A section that is not in the file yet is appended at its end. Whenever a
section is written, the ``machine`` section is refreshed too (cores, memory,
CPU, versions, commit), so the figures and the machine stay together.
"""

from __future__ import annotations

import csv
import os
import platform
import re
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.suites import REPO

COLUMNS = ("suite", "problem", "mode", "buffers", "capacity", "lower_bound", "planner",
           "arena_size", "ratio", "status", "best_bound", "gap", "seconds", "peak_rss_mb",
           "base_rss_mb", "runs", "note")
_SHOWN = (  # markdown: (heading, column)
    ("problem", "problem"), ("mode", "mode"), ("buffers", "buffers"),
    ("lower bound", "lower_bound"), ("planner", "planner"), ("arena", "arena_size"),
    ("ratio", "ratio"), ("status", "status"), ("proven bound", "best_bound"),
    ("proven gap", "gap"), ("seconds", "seconds"), ("peak MB", "peak_rss_mb"))
_GOOD = ("optimal", "feasible", "infeasible")
DOC = REPO / "BENCHMARKS.md"


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "—"
    if column == "ratio":
        return f"{value:.4f}"
    if column == "gap":
        return "<0.01%" if 0 < value < 1e-4 else f"{value:.2%}"  # not optimal, just close
    if column == "seconds":
        return f"{value:.3f}" if value < 100 else f"{value:.0f}"
    if column in ("peak_rss_mb", "base_rss_mb"):
        return f"{value:.0f}"
    if column == "status" and not any(value == good for good in _GOOD):
        return f"**{value}**"  # anything but a plain plan status: make it loud
    return str(value)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The full table, then the notes (errors, violations) numbered below it."""
    lines = ["| " + " | ".join(h for h, _ in _SHOWN) + " |",
             "|" + "|".join("---:" if c in ("buffers", "lower_bound", "arena_size", "ratio",
                                             "best_bound", "gap", "seconds", "peak_rss_mb")
                            else "---" for _, c in _SHOWN) + "|"]
    notes = []
    for row in rows:
        cells = [_cell(column, row.get(column)) for _, column in _SHOWN]
        if row.get("note"):
            notes.append(row["note"])
            cells[_SHOWN.index(("status", "status"))] += f" [{len(notes)}]"
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"[{k}] {note}" for k, note in enumerate(notes, 1)] if notes else []
    return "\n".join(lines) + "\n"


def pivot(rows: list[dict[str, Any]], column: str = "ratio") -> str:
    """Problems down, planners across, one value each (default: ratio to the lower bound).

    ``column="ratio+seconds"`` puts both in a cell: ``1.0000 (0.004 s)``.
    """
    planners = list(dict.fromkeys(row["planner"] for row in rows))
    problems = list(dict.fromkeys((row["problem"], row["mode"]) for row in rows))
    value = {(row["problem"], row["mode"], row["planner"]): row for row in rows}
    lines = ["| problem | mode | " + " | ".join(planners) + " |",
             "|---|---|" + "---:|" * len(planners)]
    for problem, mode in problems:
        cells = []
        for planner in planners:
            row = value.get((problem, mode, planner))
            if row is None:
                cells.append("")
            elif row["status"] not in _GOOD:
                cells.append(_cell("status", row["status"]))
            elif column == "ratio+seconds":
                seconds = _cell("seconds", row.get("seconds"))
                cells.append(f"{_cell('ratio', row.get('ratio'))} ({seconds} s)")
            else:
                cells.append(_cell(column, row.get(column)))
        lines.append(f"| {problem} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _first(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


def machine() -> dict[str, str]:
    """Where the figures come from: CPU, cores, memory, versions, commit, load."""
    memory = _first("/proc/meminfo", "MemTotal")
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no", "memplan"):
        commit += " (+ uncommitted changes in memplan/)"
    return {
        "cpu": _first("/proc/cpuinfo", "model name"),
        "cores": str(os.cpu_count()),
        "memory": f"{int(memory.split()[0]) / 2**20:.1f} GiB" if memory[:1].isdigit() else memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "ortools": _version("ortools"), "onnx": _version("onnx"), "numpy": _version("numpy"),
        "memplan commit": commit,
        "load average (1, 5, 15 min)": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def machine_markdown(info: dict[str, str]) -> str:
    return "\n".join(f"- {key}: {value}" for key, value in info.items()) + "\n"


def section_text(command: str, rows: list[dict[str, Any]], info: dict[str, str],
                 repeat: int) -> str:
    """A generated section: the command, when and how often it ran, the tables.

    The load average is given before and after the run (``info`` is the machine before
    it): a time-limited search proves less on a busy machine.
    """
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = "load average (1, 5, 15 min)"
    after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    parts = [f"Command: `{command}`  ",
             f"Run ended {stamp} at commit {info['memplan commit']}, load average before the "
             f"run {info[load]}, after {after}; {repeat} run(s) per row, medians "
             f"(sizes: lower median).", ""]
    if len({row["planner"] for row in rows}) == 1:
        return "\n".join(parts + [markdown(rows)])
    # several planners: problems down, planners across; every column of every row (bounds,
    # proven gaps, memory) stays in the run's results.md
    notes = [f"[{row['planner']} on {row['problem']}] {row['note']}" for row in rows
             if row.get("note") and row["status"] not in _GOOD]
    parts += ["Arena / lower bound (planner seconds):", "", pivot(rows, "ratio+seconds")] + notes
    return "\n".join(parts)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name}", f"<!-- end generated: {name} -->"


def commands(doc: Path) -> dict[str, str]:
    """The generated sections of ``doc`` and the commands that wrote them, in order."""
    found = re.findall(r"<!-- generated: (\S+) \((python -m benchmarks .*?)\) -->",
                       doc.read_text() if doc.exists() else "")
    return dict(found)


def update_section(doc: Path, name: str, body: str, command: str | None = None) -> None:
    """Replace (or append) the generated section ``name`` of ``doc`` with ``body``."""
    begin, end = _markers(name)
    header = f"{begin} ({command}) -->" if command else f"{begin} -->"
    block = f"{header}\n{body.rstrip()}\n{end}"
    text = doc.read_text() if doc.exists() else ""
    pattern = re.compile(re.escape(begin) + r"[ (].*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip() + f"\n\n### {name}\n\n{block}\n"
    doc.write_text(text if text.endswith("\n") else text + "\n")
