"""The device benchmark runs at toy size (on the CPU where no GPU is seen) so it cannot rot."""
import json

from benchmarks.device import main


def test_quick_device_benchmark_reports_every_step(capsys):
    assert main(["--quick", "--devices", "cpu"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    cpu = record["cpu"]
    assert record["benchmark"] == "device" and cpu["finished"] and cpu["steps_done"] == 3
    assert len(cpu["step_times_s"]) == 3 and cpu["median_step_s"] > 0 and cpu["teacher_s"] > 0


def test_a_run_stopped_at_the_limit_reports_its_finished_steps(capsys):
    """A run still going at ``--limit`` is stopped and reports the steps it finished. The limit is
    lengthened where a loaded machine finished no step in it (15 s gave none once while a 32-qubit fit held
    both cores; 12 s gave 7 steps beside two runs on 2 cores); 4,000 LiH steps take far longer than 60 s."""
    for limit in ("15", "30", "60"):
        assert main(["--molecule", "LiH", "--steps", "4000", "--pretrain-steps", "5", "--devices", "cpu",
                     "--limit", limit]) == 0  # fmt: skip
        cpu = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cpu"]
        if cpu["steps_done"]:
            break
    assert not cpu["finished"] and 0 < cpu["steps_done"] < 4000
    assert len(cpu["step_times_s"]) == cpu["steps_done"] and cpu["energy"] is None
