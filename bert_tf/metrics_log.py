"""A pretraining run's record of its metrics: metrics.csv, TensorBoard scalars, log lines."""

import csv
import io
import os

import tensorflow as tf

from bert_tf.files import write_text

CSV_COLUMNS = ("step", "split", "loss", "mlm_loss", "mlm_accuracy", "mlm_perplexity",
               "mlm_hidden_loss", "mlm_hidden_accuracy", "nsp_loss", "nsp_accuracy",
               "learning_rate", "grad_norm", "examples_per_second", "elapsed_seconds")


class MetricsLog:
    """metrics.csv and TensorBoard scalars in model_dir.

    The CSV is rewritten whole on every write (object stores such as gs:// cannot
    append); rows after the step a run resumes from are dropped, since it redoes them.
    """

    def __init__(self, model_dir: str, enabled: bool, after_step: int):
        self.enabled = enabled
        self.elapsed_before = 0.0
        if not enabled:
            return
        tf.io.gfile.makedirs(model_dir)
        self.path = os.path.join(model_dir, "metrics.csv")
        self.rows = []
        if tf.io.gfile.exists(self.path):
            with tf.io.gfile.GFile(self.path) as f:
                self.rows = [row for row in csv.DictReader(f) if int(row["step"]) <= after_step]
        if self.rows:  # a resumed run's clock goes on from its last kept row
            self.elapsed_before = float(self.rows[-1]["elapsed_seconds"])
        self.writers = {split: tf.summary.create_file_writer(
            os.path.join(model_dir, "tensorboard", split)) for split in ("train", "eval")}

    def write(self, step: int, split: str, metrics: dict, elapsed: float) -> None:
        if not self.enabled:
            return
        with self.writers[split].as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        self.writers[split].flush()
        self.rows.append({"step": step, "split": split, "elapsed_seconds": round(elapsed, 1),
                          **{k: f"{v:.6g}" for k, v in metrics.items() if k in CSV_COLUMNS}})
        text = io.StringIO()
        writer = csv.DictWriter(text, CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        write_text(self.path, text.getvalue())

    def close(self) -> None:
        if self.enabled:
            for writer in self.writers.values():
                writer.close()


def format_metrics(step: int, total: int, metrics: dict, split: str = "train") -> str:
    """The log line of a training interval or an evaluation."""
    parts = [f"{split} step {step}/{total}", f"loss {metrics['loss']:.4f}",
             f"mlm {metrics['mlm_loss']:.4f} acc {metrics['mlm_accuracy']:.4f}"
             + (f" (hidden {metrics['mlm_hidden_accuracy']:.4f})"
                if "mlm_hidden_accuracy" in metrics else "")]
    if "nsp_loss" in metrics:
        parts.append(f"nsp {metrics['nsp_loss']:.4f} acc {metrics['nsp_accuracy']:.4f}")
    if split == "eval":
        parts.append(f"perplexity {metrics['mlm_perplexity']:.2f}")
    else:
        parts += [f"lr {metrics['learning_rate']:.3g}", f"gnorm {metrics['grad_norm']:.3f}",
                  f"{metrics['examples_per_second']:.1f} ex/s"]
    return " | ".join(parts)
