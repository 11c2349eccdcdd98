"""MkDocs hook: pages include code blocks of the README instead of copying them.

A line ``<!-- readme-code: SECTION -->`` in a page becomes the first Python code block under
the README's heading ``SECTION``, so the tutorial shows the very code the README's test runs.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = re.compile(r"^<!-- readme-code: (.+?) -->$", re.M)


def readme_code(section: str, readme: Path = README) -> str:
    """The first ```` ```python ```` block under the heading ``section`` of the README."""
    text = readme.read_text()
    heading = re.search(rf"^#+ {re.escape(section)}\s*$", text, re.M)
    if heading is None:
        raise ValueError(f"{readme.name} has no heading {section!r}")
    block = re.search(r"^```python\n(.*?)^```", text[heading.end():], re.S | re.M)
    if block is None:
        raise ValueError(f"{readme.name}: no Python block under {section!r}")
    return block.group(1)


def on_page_markdown(markdown: str, **kwargs) -> str:
    return MARKER.sub(lambda m: f"```python\n{readme_code(m.group(1))}```", markdown)
