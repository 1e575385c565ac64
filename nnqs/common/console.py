"""One-line notes to the user on stderr (what the run did on its own, e.g. a rebuilt history)."""
from __future__ import annotations

import sys


def note(message: str) -> None:
    """Print ``nnqs: note: message`` as one line on stderr."""
    sys.stderr.write(f"nnqs: note: {message}\n")
    sys.stderr.flush()
