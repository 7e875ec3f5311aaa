"""glue_suite.timings and bert_tf.timing's stage clock: stages add up, the grid's fits split
into build, tracing, steps and evaluation, the step clock's first step carries the tracing,
and start-up is the process's age."""

import subprocess
import sys
import time

import pytest

from bert_tf import timing
from glue_suite import timings


def test_stages_add_up_repeated_entries():
    stages = timing.Stages()
    for _ in range(2):
        with stages("read"):
            time.sleep(0.01)
    with pytest.raises(RuntimeError), stages("grid"):  # a failing stage still counts
        raise RuntimeError
    assert stages.seconds["read"] >= 0.02 and set(stages.seconds) == {"read", "grid"}


def test_run_breakdown_splits_the_grid():
    train = {"build_seconds": 2.0, "trace_seconds": 10.0, "seconds": 50.0}
    runs = [{"train": train, "evaluate_seconds": 5.0}] * 2
    stages = {"read": 0.5, "checkpoint": 0.5, "featurize": 1.0, "grid": 140.0, "write": 0.2}
    breakdown = timings.run_breakdown(6.0, stages, runs)
    assert breakdown == {"startup": 6.0, "read": 0.5, "checkpoint": 0.5, "featurize": 1.0,
                         "write": 0.2, "model_build": 4.0, "trace": 20.0, "train_steps": 80.0,
                         "evaluate": 10.0, "grid_other": 26.0, "total": 148.2}


def test_step_clock_first_step_carries_the_tracing():
    clock = timings.StepClock()
    clock.on_train_begin()
    for pause in (0.05, 0.01, 0.01, 0.01):
        time.sleep(pause)
        clock.on_train_batch_end(0)
    summary = clock.summary()
    assert summary["first_step_seconds"] >= 0.05
    assert summary["trace_seconds"] == pytest.approx(
        summary["first_step_seconds"] - summary["step_seconds_median"], abs=0.01)


def test_startup_is_the_process_age_within_a_clock_tick():
    """A child that sleeps 0.3 s before asking: its age is at least that and no more than
    the parent saw it live (psutil's whole-second boot time overstated it by up to 1 s)."""
    code = ("import time; time.sleep(0.3); from bert_tf import timing; "
            "print(timing.startup_seconds())")
    began = time.perf_counter()
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)
    lived = time.perf_counter() - began
    assert 0.3 <= age <= lived + 0.011  # + the 1/100 s of the start tick's resolution


def test_progress_log_reports_steps_left_between_epoch_lines(caplog, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(timings.time, "perf_counter", lambda: now[0])
    progress = timings.ProgressLog(total_steps=10, interval_s=60.0)
    progress.on_train_begin()
    with caplog.at_level("INFO", logger="glue_suite.timings"):
        for _ in range(10):  # 25 s a step: a line after steps 3, 6 and 9, none at the end
            now[0] += 25.0
            progress.on_train_batch_end(0, {"loss": 1.5})
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" (")[0] for line in lines] == ["step 3/10", "step 6/10", "step 9/10"]
    assert lines[0] == ("step 3/10 (30%), loss 1.5000 (epoch mean), 25.00 s/step, "
                        "~3 min left")
