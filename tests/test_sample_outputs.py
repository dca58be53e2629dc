"""Every command sample on a documentation page is what the command prints today.

The README's own example is checked by the documentation tests (``tests/test_docs.py``);
this covers the pages under ``docs/``.
"""

from __future__ import annotations

import pytest

from .conftest import REPO
from .sample_output import console_samples, same_output

PAGES = sorted((REPO / "docs").rglob("*.md"))
SAMPLES = [(page.relative_to(REPO), command, output) for page in PAGES if page.is_file()
           for command, output in console_samples(page.read_text())]


@pytest.mark.parametrize("page, command, output", SAMPLES,
                         ids=[f"{page}: {command}" for page, command, _ in SAMPLES])
def test_documented_sample_is_the_real_output(page, command, output):
    assert same_output(output, command), f"{page}: `{command}` prints otherwise"
