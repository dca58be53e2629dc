"""Only links that exist: no absolute URL to a host the project does not own, no link or
cited file the repository does not have.

Nothing of memplan is published, so its text links the repository itself: relative links
(``docs/how-to/onnx.md``), which any code host renders and ``mkdocs serve`` turns into the
site. An absolute URL is allowed only to a source the text needs and names as such (the
licence, where bundled data comes from, an install option), each listed below with why.
Every text file git tracks is searched (`tests.test_wording.tracked_files`).
"""

from __future__ import annotations

import re
from pathlib import Path

from .test_wording import ROOT, tracked_files

ALLOWED = (  # an absolute URL must start with one of these
    "http://www.apache.org/licenses/",  # the licence's own text (LICENSE files)
    "https://github.com/google/minimalloc",  # where MiniMalloc's problems come from
    "https://download.pytorch.org/whl/cpu",  # torch's CPU build, an install option
)
URL = re.compile(r"\bhttps?://[^\s)\"'`<>\]}]+")
LINK = re.compile(r"\]\(([^)\s]+)\)")  # a markdown link's target
CITED = re.compile(r"(?<![\w/.-])([\w./-]*[\w-]\.md)\b")
WRITTEN = {"results.md", "table.md", "page.md"}  # files the benchmarks and tests write
INCLUDED = re.compile(r'^--8<-- "([^"]+)"', re.MULTILINE)  # a page the site pastes in


CODE = re.compile(r"^\s*```.*?^\s*```|`[^`\n]*`", re.DOTALL | re.MULTILINE)


def _links(markdown: str) -> list[str]:
    """The targets of a page's markdown links, its code blocks and code spans left out."""
    return LINK.findall(CODE.sub("", markdown))


def _texts() -> list[tuple[Path, str]]:
    here = Path(__file__).resolve()
    return [(path, path.read_text(encoding="utf-8", errors="replace"))
            for path in tracked_files() if path != here]


def test_no_absolute_url_but_the_allowed_sources():
    found = [f"{path.relative_to(ROOT)}: {url}" for path, text in _texts()
             for url in URL.findall(text) if not url.startswith(ALLOWED)]
    assert found == [], "link inside the repository instead (docs/...md):\n" + "\n".join(found)


def _exists(target: str, page: Path) -> bool:
    target = target.split("#")[0]
    return not target or any((base / target).exists()
                             for base in (page.parent, ROOT, ROOT / "docs"))


def test_every_relative_markdown_link_resolves():
    broken = [f"{path.relative_to(ROOT)}: {target}" for path, text in _texts()
              if path.suffix == ".md" for target in _links(text)
              if not re.match(r"[a-z]+:", target) and not _exists(target, path)]
    assert broken == []


def test_a_file_the_site_pastes_in_has_no_relative_link():
    """BENCHMARKS.md and CHANGELOG.md are pasted into pages under docs/, where a relative
    link would resolve from the pasting page: they name paths in code instead."""
    pasted = {name for page in (ROOT / "docs").rglob("*.md")
              for name in INCLUDED.findall(page.read_text())}
    assert {"BENCHMARKS.md", "CHANGELOG.md"} <= pasted
    linked = [f"{name}: {target}" for name in sorted(pasted)
              for target in _links((ROOT / name).read_text())
              if not re.match(r"[a-z]+:", target)]
    assert linked == []


def test_every_cited_markdown_file_exists():
    """A test, a docstring or a page that names ``X.md`` names a file the repository has
    (a bare name, as code joins paths, is some tracked file's name)."""
    texts = _texts()
    names = {path.name for path, _ in texts}
    missing = [f"{path.relative_to(ROOT)}: {name}" for path, text in texts
               for name in CITED.findall(URL.sub("", text))
               if name not in WRITTEN and not _exists(name, path)
               and ("/" in name or name not in names)]
    assert missing == []


SECTION = re.compile(r'\b([\w./-]+\.md)(?:,|\s\()\s*(?:sections?\s+)?"([^"]+)"')


def test_every_cited_section_is_a_heading_of_its_file():
    """``BENCHMARKS.md ("Tilings")`` or ``CHANGELOG.md, "Measured"``: a heading, or the bold
    head of a paragraph, of that file."""
    missing = []
    for path, text in _texts():
        for name, section in SECTION.findall(" ".join(text.split())):
            cited = next((base / name for base in (path.parent, ROOT, ROOT / "docs")
                          if (base / name).is_file()), None)
            if cited is None:
                continue  # a missing file is the test above's
            lines = [line.strip() for line in cited.read_text().splitlines()]
            if not any(re.match(rf"(?:#+ |[-*] )?\**{re.escape(section)}", line)
                       for line in lines):
                missing.append(f"{path.relative_to(ROOT)}: {name}, {section!r}")
    assert missing == []
