"""``pretrain.pt``: the teacher's vector and the teacher fit's latest state, so that a run stopped
before its first VMC checkpoint (kill -9 included) resumes its pretraining where it was.

At 26-32 qubits the selected-CI teacher and its fit take about ten minutes, before the first
``checkpoint.pt``. The store is written atomically and sealed like a checkpoint
(:mod:`nnqs.common.checkpoint`, kind ``"vmc-pretrain"``): the teacher once it is grown, the fit every
``seconds`` and at its end. It is read only on ``--resume``, and only if it was written for the
same system and the same settings (``identity``); otherwise the pretraining starts afresh, with a note.
"""
from __future__ import annotations

import time
from pathlib import Path

from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.common.console import note
from nnqs.common.errors import UserError

KIND = "vmc-pretrain"
FILE = "pretrain.pt"


class PretrainStore:
    """The pretraining state of one run folder (``write``: this process writes it, rank 0 alone)."""

    def __init__(self, path: Path, identity: dict, seconds: float, write: bool = True) -> None:
        self.path, self.identity, self.seconds, self.write = Path(path), identity, seconds, write
        self.data: dict = {}
        self._last = time.monotonic()

    def load(self) -> dict:
        """What a resumed run finds (``{"teacher": ..., "fit": ...}``, either may be absent)."""
        if not self.path.is_file():
            return {}
        try:
            data = load_checkpoint(self.path, KIND)
        except UserError as exc:
            note(f"{exc}; the pretraining starts afresh")
            return {}
        if data.get("identity") != self.identity:
            note(f"{self.path} was written for another system or other settings; the pretraining starts afresh")
            return {}
        self.data = {k: data[k] for k in ("teacher", "fit") if k in data}
        return self.data

    def save_teacher(self, teacher: dict) -> None:
        self.data = {"teacher": teacher}
        self._flush()

    def offer_fit(self, state: dict, final: bool) -> None:
        """Write the fit's ``state`` when ``seconds`` passed since the last write, or at its end."""
        if final or (self.seconds and time.monotonic() - self._last >= self.seconds):
            self.data["fit"] = state
            self._flush()

    def _flush(self) -> None:
        if self.write:
            save_checkpoint(self.path, KIND, {"identity": self.identity, **self.data})
        self._last = time.monotonic()
