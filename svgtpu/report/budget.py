"""The note's word budget: :func:`body_words` counts the body as a reader reads it, generated table rows aside,
against :data:`BODY_WORDS`; the long tables live in the appendix, the prose stays in the note."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from svgtpu.report.blocks import BLOCK

#: The note's body is at most this many words (:func:`body_words`): a note, with the long tables in the appendix.
BODY_WORDS = 6500


def body_words(text: str) -> int:
    """Words of the note as a reader reads it: prose, generated sentences, figure captions and inline values count;
    the rows of generated tables (lines starting with ``|`` between begin / end markers), code blocks, markers and
    other HTML comments, and image links do not.  A word is a whitespace-separated token holding a letter or digit."""
    text = BLOCK.sub(lambda m: "\n".join(line for line in m["body"].splitlines()
                                          if not line.lstrip().startswith("|")), text)
    for pattern in (r"```.*?```", r"<!--.*?-->", r"!\[[^\]]*\]\([^)]*\)"):
        text = re.sub(pattern, " ", text, flags=re.DOTALL)
    return sum(1 for word in text.split() if re.search(r"\w", word))


def notebook_markdown(path: str | os.PathLike) -> str:
    """The markdown cells of a notebook, joined (what a reader reads as prose)."""
    cells = json.loads(Path(path).read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


__all__ = ["BODY_WORDS", "body_words", "notebook_markdown"]
