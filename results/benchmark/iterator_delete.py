"""How long deleting a fine-tuning iterator takes: with tf.data's autotuning and without,
and inside Keras's fit, with a new iterator every epoch and with one for the whole fit.

Keras's fit, given a finite dataset, deletes the epoch's iterator when an epoch ends.
glue_suite's training batches (`batching.train_dataset`, 78 batches: RTE's size) are drawn
slowly, as a training step would draw them, for a given lifetime; then the iterator is
deleted and the deletion timed. The pipelines run without autotuning
(`distribute.without_autotune`); "autotuned" turns it back on for comparison.

--fit_rounds: the same batches through `Model.fit`, 4 epochs of a model too small to cost
anything, each step followed by a pause (--fit_pause) so that each epoch lives about as
long as an RTE epoch. Variants: under `--strategy cpu`'s OneDeviceStrategy (through the
MultiDeviceIterator Keras makes for a strategy) with a new iterator every epoch (a finite
dataset: glue_suite before) or one iterator per fit (`finetune.one_iterator_per_fit`); and
glue_suite now: one iterator per fit under the default strategy
(`distribute.for_keras_fit`). Measured: the gap before each later epoch's first step, and
the time from the end of training (on_train_end) to fit's return, where the last
iterator goes.

    python results/benchmark/iterator_delete.py --lifetimes 5,20,40,60,90 --rounds 2
    python results/benchmark/iterator_delete.py --lifetimes '' --fit_rounds 3

Prints the provenance header and, per lifetime, each variant's deletion seconds per round;
per fit round, each variant's epoch-start gaps and fit-end seconds.
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf

from bert_tf import distribute, timing
from glue_suite import batching, finetune

NUM_ROWS, MAX_SEQ_LENGTH, BATCH_SIZE = 2490, 128, 32  # RTE's train set, 78 batches


def rte_like_dataset() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 200, NUM_ROWS).clip(max=MAX_SEQ_LENGTH)
    mask = (np.arange(MAX_SEQ_LENGTH) < lengths[:, None]).astype(np.int32)
    inputs = {"input_ids": rng.integers(5, 30000, mask.shape).astype(np.int32) * mask,
              "input_mask": mask, "segment_ids": np.zeros_like(mask)}
    labels = rng.integers(0, 2, NUM_ROWS).astype(np.int32)
    return batching.train_dataset((inputs, labels), BATCH_SIZE, seed=0, length_multiple=16)


def autotuned(dataset: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    options.autotune.enabled = True
    return dataset.with_options(options)


def seconds_to_delete(dataset: tf.data.Dataset, lifetime: float) -> float:
    """Draws the whole epoch over `lifetime` seconds, then deletes the iterator."""
    iterator = iter(dataset)
    pause = lifetime / dataset.cardinality().numpy()
    for _ in iterator:
        time.sleep(pause)
    began = time.perf_counter()
    del iterator
    return time.perf_counter() - began


class _FitClock(keras.callbacks.Callback):
    """Pauses after every step; records the gap before each later epoch's first step and
    when training ended."""

    def __init__(self, pause: float):
        super().__init__()
        self.pause, self.epoch_start_gaps, self.last_step_end = pause, [], None

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0 and self.last_step_end is not None:
            self.epoch_start_gaps.append(time.perf_counter() - self.last_step_end)

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.pause)
        self.last_step_end = time.perf_counter()

    def on_train_end(self, logs=None):
        self.train_end = time.perf_counter()


def fit_stalls(strategy: tf.distribute.Strategy, one_iterator: bool, pause: float,
               epochs: int = 4) -> tuple[list, float]:
    """(later epochs' start gaps, seconds from the end of training to fit's return)."""
    with strategy.scope():
        inputs = {name: keras.Input((None,), dtype="int32", name=name)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        pooled = keras.layers.GlobalAveragePooling1D()(
            keras.layers.Embedding(30522, 8)(inputs["input_ids"]))
        model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    dataset, steps_per_epoch = rte_like_dataset(), None
    if one_iterator:
        dataset, steps_per_epoch = finetune.one_iterator_per_fit(dataset)
    clock = _FitClock(pause)
    model.fit(dataset, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=0,
              callbacks=[clock])
    return clock.epoch_start_gaps, time.perf_counter() - clock.train_end


def deletion_after_lifetimes(args) -> None:
    untuned = rte_like_dataset()
    variants = {"untuned (glue_suite)": untuned, "autotuned": autotuned(untuned)}
    print(f"{'lifetime s':>10}  " + "  ".join(f"{name:>24}" for name in variants))
    for lifetime in (float(x) for x in args.lifetimes.split(",")):
        seconds = {name: [] for name in variants}
        for r in range(args.rounds):
            names = list(variants)[r % 2:] + list(variants)[:r % 2]  # rotated
            for name in names:
                seconds[name].append(seconds_to_delete(variants[name], lifetime))
        print(f"{lifetime:>10g}  " + "  ".join(
            f"{' '.join(f'{s:.2f}' for s in seconds[name]):>24}" for name in variants),
            flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lifetimes", default="5,20,40,60,90",
                   help="comma-separated seconds each iterator lives")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--fit_rounds", type=int, default=0,
                   help="rounds of the Model.fit comparison (0: none)")
    p.add_argument("--fit_pause", type=float, default=0.7,
                   help="seconds after each fit step (0.7: ~55 s an epoch of 78 steps)")
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/iterator_delete.py")))
    if args.lifetimes:
        deletion_after_lifetimes(args)
    cpu = distribute.create_strategy("cpu")
    fit_variants = {  # name: (strategy, one iterator per fit)
        "OneDevice, per-epoch iterators": (cpu, False),
        "OneDevice, one iterator": (cpu, True),
        "default, one iterator (now)": (distribute.for_keras_fit(cpu), True)}
    names = list(fit_variants)
    for r in range(args.fit_rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotated
            gaps, end = fit_stalls(*fit_variants[name], args.fit_pause)
            print(f"fit round {r + 1}  {name:>30}: epoch-start gaps "
                  f"{' '.join(f'{g:.2f}' for g in gaps)} s, fit end {end:.2f} s", flush=True)


if __name__ == "__main__":
    main()
