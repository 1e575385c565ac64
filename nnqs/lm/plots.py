"""The learning curve of an LM run (``curve.png``)."""
from __future__ import annotations

import io
from pathlib import Path

from nnqs.common.atomic import atomic_write_bytes
from nnqs.lm.train import EvalRecord


def plot_curve(path: str | Path, history: list[EvalRecord], title: str) -> None:
    """Training loss (log scale) and validation accuracies against step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r.step for r in history]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(steps, [r.train_loss for r in history], marker=".")
    ax_loss.set(xlabel="step", ylabel="training loss (answer tokens)", yscale="log", title=title)
    ax_acc.plot(steps, [r.val_exact_match for r in history], marker=".", label="exact match")
    ax_acc.plot(steps, [r.val_token_accuracy for r in history], marker=".", label="token accuracy")
    ax_acc.set(xlabel="step", ylabel="validation", ylim=(0, 1.02), title="held-out validation")
    ax_acc.legend(loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, lambda fh: fh.write(buf.getvalue()))
