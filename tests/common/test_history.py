"""history.csv: rows appended and fsynced one by one; on resume the file is checked against the
rows the checkpoint holds -- cut back, or rebuilt when missing or foreign, never glued."""
import csv
import errno
import os

import pytest

from nnqs.common.errors import EnvironmentFailure
from nnqs.common.history import HistoryWriter, new_history, resume_history

FIELDS = ("step", "energy", "note")


def written(tmp_path, n=5, float_format=".12g"):
    path = tmp_path / "history.csv"
    writer = new_history(path, FIELDS, float_format)
    for step in range(n):
        writer.append({"step": step, "energy": -1.0 / (step + 3), "note": None})
    writer.close()
    return path, writer.state()


def test_rows_are_csv_with_the_requested_float_format(tmp_path):
    path, state = written(tmp_path)
    rows = list(csv.DictReader(path.open(newline="")))
    assert [r["step"] for r in rows] == ["0", "1", "2", "3", "4"]
    assert rows[1]["energy"] == format(-0.25, ".12g") and rows[0]["energy"] == "-0.333333333333" and rows[0]["note"] == ""
    assert state["rows"][0] == ["0", "-0.333333333333", ""] and state["fields"] == list(FIELDS)
    (tmp_path / "repr").mkdir()
    path2, _ = written(tmp_path / "repr", 1, None)
    assert next(csv.DictReader(path2.open(newline="")))["energy"] == repr(-1.0 / 3)


def expected_text(state, keep):
    return ",".join(FIELDS) + "\n" + "".join(",".join(r) + "\n" for r in state["rows"][:keep])


@pytest.mark.parametrize("damage, note", [
    (lambda p, t: p.write_text(t + "5,-0.1,\n6,-0.2,\n"), None),  # rows logged after the checkpoint: cut
    (lambda p, t: p.write_text(t + "5,-0.1"), None),  # a torn last line: cut
    (lambda p, t: p.unlink(), "is missing"),
    (lambda p, t: p.write_text(t.replace("-0.25", "-0.5")), "row 2 (1,-0.5,) differs from the checkpoint"),
    (lambda p, t: p.write_text("a,b\n1,2\n"), "has other columns"),
    (lambda p, t: p.write_bytes(t.encode()[:40] + b"\0\0\0\0" + t.encode()[40:]), "holds NUL bytes"),
    (lambda p, t: p.write_text("\n".join(t.splitlines()[:3]) + "\n"), "holds 2 rows, the checkpoint 4"),
    (lambda p, t: p.write_text(t.splitlines()[0] + "\n" + "\n".join(t.splitlines()[2:]) + "\n"), "row 1 (1,-0.25,)"),
])
def test_resume_cuts_or_rebuilds_never_glues(tmp_path, capsys, damage, note):
    path, state = written(tmp_path)
    saved = {"fields": state["fields"], "rows": state["rows"][:4]}  # the checkpoint was at step 4
    damage(path, expected_text(state, 4))
    capsys.readouterr()
    writer = resume_history(path, saved, FIELDS, ".12g")
    writer.append({"step": 4, "energy": -1.0 / 7, "note": None})
    writer.close()
    assert path.read_text() == expected_text(state, 5)
    err = capsys.readouterr().err
    if note is None:
        assert err == ""
    else:
        assert err.startswith(f"nnqs: note: {path} {note}") and "rebuilt it from the 4 rows the checkpoint holds" in err


def test_a_full_disk_names_the_history_file(tmp_path, monkeypatch):
    path, state = written(tmp_path, 2)
    writer = HistoryWriter(path, FIELDS, ".12g", state["rows"])
    real = os.fsync

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}") == str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(EnvironmentFailure, match=f"no space left on device while writing {path}; "):
        writer.append({"step": 2, "energy": 0.5, "note": None})
