"""Where a fine-tuning run's seconds go (metrics.json "timings"): start-up (interpreter and
imports) and each stage of `glue_suite.run` (both timed by `bert_tf.timing`), and within
every fit the model build, the first step (which traces the train step) and the typical
step.

Short runs are dominated by these fixed costs, so they are logged next to the training
time rather than hidden in the wall time.
"""

import logging
import time

import keras
import numpy as np

logger = logging.getLogger(__name__)


class StepClock(keras.callbacks.Callback):
    """When `fit` began and when each of its steps ended."""

    def on_train_begin(self, logs=None):
        self.began, self.ends = time.perf_counter(), []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())

    def summary(self) -> dict:
        steps = np.diff(self.ends)
        median = float(np.median(steps)) if len(steps) else 0.0
        first = self.ends[0] - self.began if self.ends else 0.0
        return {"first_step_seconds": round(first, 2), "step_seconds_median": round(median, 3),
                # The first step's excess over a typical one: tracing and graph optimisation.
                "trace_seconds": round(max(first - median, 0.0), 2)}


class ProgressLine:
    """`<what> k/N (p%)<extra>, ~M min left`, logged at most every `interval_s` seconds
    and not at the end, which the caller reports itself.

    Keras's verbose=2 (what `reproduce` asks, for log files) writes one line per epoch and
    one per prediction, which leaves a long one (SQuAD on a CPU: an hour a training epoch,
    minutes of dev predictions) silent.
    """

    def __init__(self, what: str, total: int, interval_s: float = 60.0):
        self.what, self.total, self.interval_s = what, total, interval_s
        self.began = self.last = time.perf_counter()

    def update(self, done: int, extra=lambda: "") -> None:
        """`extra()`: more of the line, computed only when one is logged."""
        now = time.perf_counter()
        if now - self.last < self.interval_s or done >= self.total:
            return
        self.last = now
        left = (now - self.began) / done * (self.total - done)
        logger.info("%s %d/%d (%.0f%%)%s, ~%.0f min left", self.what, done, self.total,
                    100 * done / self.total, extra(), left / 60)


class ProgressLog(keras.callbacks.Callback):
    """Model.fit's `ProgressLine`: steps, with the loss and the pace."""

    def __init__(self, total_steps: int, interval_s: float = 60.0):
        super().__init__()
        self.total_steps, self.interval_s = total_steps, interval_s

    def on_train_begin(self, logs=None):
        self.step, self.line = 0, ProgressLine("step", self.total_steps, self.interval_s)

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1

        def loss_and_pace():  # reading the loss waits for the step: only when logged
            loss = (logs or {}).get("loss")
            pace = (time.perf_counter() - self.line.began) / self.step
            return (("" if loss is None else f", loss {float(loss):.4f} (epoch mean)")
                    + f", {pace:.2f} s/step")
        self.line.update(self.step, loss_and_pace)


def run_breakdown(startup: float, stages: dict, runs: list) -> dict:
    """metrics.json "timings": start-up, the run's stages, and the grid's fits split into
    model build, tracing, training steps and evaluation (summed over the grid's runs).

    Args:
        startup: `bert_tf.timing.startup_seconds()` when the run began.
        stages: `bert_tf.timing.Stages.seconds` of the run (read, checkpoint, featurize, grid, write).
        runs: the grid's runs, each with "train" (fine_tune's history) and
            "evaluate_seconds"; those "resumed" from an earlier process
            (glue_suite.grid_progress) took their seconds there and are left out.
    """
    runs = [r for r in runs if not r.get("resumed")]
    total = lambda key: sum(r["train"][key] for r in runs)
    trace = total("trace_seconds")
    breakdown = {"startup": startup, **{k: v for k, v in stages.items() if k != "grid"},
                 "model_build": total("build_seconds"), "trace": trace,
                 "train_steps": total("seconds") - trace,
                 "evaluate": sum(r["evaluate_seconds"] for r in runs)}
    breakdown["grid_other"] = stages.get("grid", 0.0) - sum(
        breakdown[k] for k in ("model_build", "trace", "train_steps", "evaluate"))
    breakdown["total"] = startup + sum(stages.values())
    return {k: round(v, 2) for k, v in breakdown.items()}
