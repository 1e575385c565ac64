"""The progress line on a pipe: every ``every`` steps and at the end, the end moved by an LM run's tail."""
import io

from nnqs.common.progress import Progress


def test_a_moved_total_keeps_the_line_every_few_steps_up_to_the_new_end():
    stream = io.StringIO()
    bar = Progress(10, stream=stream, every=5)
    for step in range(1, 16):
        bar.update(step, "loss 1.0", total=15 if step >= 10 else None)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4  # steps 1, 5, 10 and 15: not one line per step once past the first total
    assert lines[-1].split()[0].startswith("100%") and "15/15" in lines[-1]
    assert "10/15" in lines[2]
