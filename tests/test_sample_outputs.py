"""Every command sample on a documentation page is what the command prints today.

The README's own example is checked by the documentation tests (``tests/test_docs.py``);
this covers the pages under ``docs/``. A block's commands run in order in a scratch
folder where the repository's ``memplan/`` and ``benchmarks/`` are at hand (a page
names ``memplan/data/squeezenet.onnx`` or ``benchmarks/data/...``), so that a command
may read the file an earlier one wrote.
"""

from __future__ import annotations

import pytest

from .conftest import REPO
from .sample_output import console_samples, same_output, session

PAGES = sorted((REPO / "docs").rglob("*.md"))
SAMPLES = [(page.relative_to(REPO), block) for page in PAGES if page.is_file()
           for block in console_samples(page.read_text())]


@pytest.mark.parametrize("page, block", SAMPLES,
                         ids=[f"{page}: {block.splitlines()[0][2:]}" for page, block in SAMPLES])
def test_documented_sample_is_the_real_output(page, block, tmp_path, monkeypatch):
    for folder in ("memplan", "benchmarks"):
        (tmp_path / folder).symlink_to(REPO / folder)
    monkeypatch.chdir(tmp_path)
    for command, output in session(block):
        assert same_output(output, command), f"{page}: `{command}` prints otherwise"


def test_a_block_of_two_commands_is_two_samples():
    block = "$ memplan solve -o plan.json --quiet\n$ memplan validate x plan.json\nvalid\n"
    assert session(block) == [("memplan solve -o plan.json --quiet", ""),
                              ("memplan validate x plan.json", "valid\n")]
