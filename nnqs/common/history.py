"""history.csv of a run, for both modes: a header, then rows appended one at a time.

Each row is written, flushed and fsynced when it is made (a crash loses nothing logged;
the file is never rewritten while the run goes on). The writer also keeps the rows as
written (strings); checkpoints store them, so a resumed run can check that history.csv
is the history of *this* run up to the checkpoint (:func:`resume_history`): rows logged
after the checkpoint (to be redone) or a torn last line are cut; a missing or foreign
file (another run's rows, other columns, NUL bytes from two writers, fewer rows than the
checkpoint) is rebuilt from the checkpoint's rows, never glued onto.
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Sequence

from nnqs.common.atomic import atomic_write_text
from nnqs.common.console import note
from nnqs.common.errors import UserError, disk_full, disk_full_error


def format_value(value: Any, float_format: str | None) -> str:
    """A CSV cell: '' for None, floats as ``float_format`` (``repr`` when None), others as ``str``."""
    if value is None:
        return ""
    if isinstance(value, float) and float_format is not None:
        return format(value, float_format)
    return str(value)


def csv_text(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as CSV lines (``\\n`` line ends)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


class HistoryWriter:
    """Appends rows of ``fields`` to ``path``; ``rows`` holds the cells written so far (header excluded)."""

    def __init__(self, path: str | Path, fields: Sequence[str], float_format: str | None = None,
                 rows: Sequence[Sequence[str]] = ()) -> None:
        """Open ``path``, which must already hold the header and ``rows`` (see :func:`new_history`)."""
        self.path, self.fields, self.float_format = Path(path), list(fields), float_format
        self.rows = [list(r) for r in rows]
        self.fh = self._guard(lambda: open(self.path, "a", newline=""))

    def append(self, row: dict[str, Any]) -> None:
        """Write one row (a dict over ``fields``) and make it durable."""
        cells = [format_value(row.get(k), self.float_format) for k in self.fields]
        line = csv_text([cells])

        def write() -> None:
            self.fh.write(line)
            self.fh.flush()
            os.fsync(self.fh.fileno())

        self._guard(write)
        self.rows.append(cells)

    def state(self) -> dict:
        """What a checkpoint stores: ``{"fields": [...], "rows": [[str, ...], ...]}``."""
        return {"fields": list(self.fields), "rows": [list(r) for r in self.rows]}

    def close(self) -> None:
        self.fh.close()

    def _guard(self, action):
        try:
            return action()
        except OSError as exc:
            if disk_full(exc):
                raise disk_full_error(self.path, exc) from None
            raise


def new_history(path: str | Path, fields: Sequence[str], float_format: str | None = None) -> HistoryWriter:
    """Start ``path`` afresh (header only) and return its writer."""
    atomic_write_text(path, csv_text([list(fields)]))
    return HistoryWriter(path, fields, float_format)


def history_problem(path: Path, fields: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """Why ``path`` does not start with the header and ``rows``; None if it does."""
    if not path.is_file():
        return "is missing"
    raw = path.read_bytes()
    if raw.startswith(csv_text([list(fields), *rows]).encode("utf-8")):
        return None
    if b"\0" in raw:
        return "holds NUL bytes (two processes wrote it)"
    try:
        found = list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error):
        return "is not a CSV text file"
    if not found or found[0] != list(fields):
        return "has other columns (the history of another kind of run)"
    complete = found[1:]
    for i, expected in enumerate(rows):
        if i >= len(complete):
            return f"holds {len(complete)} rows, the checkpoint {len(rows)}"
        if complete[i] != list(expected):
            return f"row {i + 1} ({','.join(complete[i])[:40]}) differs from the checkpoint (another run's rows?)"
    return "does not match the checkpoint"


def resume_history(path: str | Path, saved: dict, fields: Sequence[str], float_format: str | None = None,
                   ) -> HistoryWriter:
    """The writer of a resumed run: ``path`` cut back to the checkpoint's rows, or rebuilt from them.

    ``saved`` is the checkpoint's ``history`` entry. Rows after the checkpoint are dropped
    silently (the run redoes those steps); any other mismatch is reported in one note.
    """
    path = Path(path)
    rows = [list(r) for r in saved["rows"]]
    if list(saved["fields"]) != list(fields):
        raise UserError(f"the checkpoint of {path.parent} logs other history columns than this run")
    expected = csv_text([list(fields), *rows])
    problem = history_problem(path, fields, rows)
    if problem is not None:
        note(f"{path} {problem}; rebuilt it from the {len(rows)} rows the checkpoint holds")
    if problem is not None or path.stat().st_size != len(expected.encode("utf-8")):
        atomic_write_text(path, expected)
    return HistoryWriter(path, fields, float_format, rows)
