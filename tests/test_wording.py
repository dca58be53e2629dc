"""The repository speaks of the software only: no word of how it was made.

Docs, docstrings, comments, test names, benchmarks and notebooks describe what memplan
does and how it behaves; none of them names the people or the process behind a change
(engineers, helpers, a lead, agents, work sessions) or a tracker's issue numbers, which
mean nothing to a reader of the package. Every text file git tracks is searched, or, in
an unpacked sdist without git, every text file under the project's root.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = {".py", ".md", ".ipynb", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".in", ".c", ".h",
        ".json", ".sh", ""}
_NOT_A_THING = (r"(?!\s+(?:thread|threads|function|functions|module|class|method|script|"
                r"process|per))")
FORBIDDEN = {
    "engineers": r"\bengineers?\b|engineers[']",
    "an issue number": r"\bissues?\s*#?\s*\d+|\bissue-\d+|#\d+-issue",
    "a work session": r"\b(?:this|previous|earlier|later|next|last|first|second|third|fourth|"
                      r"fifth|another|same|whole|each|a|that|our|my|working) sessions?\b"
                      + _NOT_A_THING + r"|\bend of(?: the)? session\b|\bsessions? on issue",
    "a helper (a person)": r"\b(?:the|a|another|other|each|every|docs|our) helpers?\b"
                           + _NOT_A_THING + r"|\bhelpers'",
    "a lead (a person)": r"\(lead\b|\bthe lead\b(?!\s+(?:to|time|of|in|up|through))"
                         r"|\blead(?:'s| engineer| developer)\b",
    "agents": r"\b(?:ai |coding |llm )?agents?\b",
}
PATTERN = re.compile("|".join(f"(?P<k{i}>{p})" for i, p in enumerate(FORBIDDEN.values())),
                     re.IGNORECASE)
NAMES = list(FORBIDDEN)


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()
        paths = [ROOT / name for name in listed]
    except (OSError, subprocess.CalledProcessError):  # an unpacked sdist: no git
        paths = [p for p in ROOT.rglob("*") if ".git" not in p.parts and ".venv" not in p.parts]
    return sorted(p for p in paths if p.is_file() and p.suffix in TEXT
                  and p != Path(__file__).resolve())


def findings(text: str) -> list[tuple[int, str, str]]:
    """(line, what, the words) for each forbidden phrase in ``text``."""
    found = []
    for match in PATTERN.finditer(text):
        kind = NAMES[int(next(k for k, v in match.groupdict().items() if v)[1:])]
        found.append((text.count("\n", 0, match.start()) + 1, kind, match.group()))
    return found


def test_no_words_about_the_making():
    bad = [f"{path.relative_to(ROOT)}:{line}: {kind}: {words!r}"
           for path in tracked_files()
           for line, kind, words in findings(path.read_text(errors="replace"))]
    assert bad == [], "\n".join(bad)


def test_the_search_finds_each_kind_and_spares_the_software_words():
    caught = ("as other engi" "neers' builds showed", "fixed in iss" "ue 13",
              "see #x-iss" "ue-18", "Iss" "ue 13's promise", "(lead, end of ses" "sion)",
              "a second ses" "sion on it",
              "the docs helper writes it", "the lead merges", "a coding agent")
    assert all(findings(text) for text in caught)
    spared = ("ort.InferenceSession(model)", "one session per key", "helper threads",
              "onnx.helper.make_node", "the one-node sessions are kept", "leads to a gap",
              "leader = os.openpty()", "a shared helper function")
    assert [text for text in spared if findings(text)] == []
