"""Pretraining BERT on tf.distribute: the paper's objectives, two phases, exact resumption.

    python -m bert_tf.pretrain --config base --objective nsp --vocab_file vocab.txt \\
        --train_files 'pretrain_128/part-*' --model_dir runs/base \\
        --strategy tpu --tpu my-tpu --global_batch_size 256 --num_train_steps 1000000 \\
        --phase2_train_files 'pretrain_512/part-*' --phase2_seq_length 512 \\
        --phase2_fraction 0.1 --learning_rate 1e-4 --num_warmup_steps 10000 \\
        --precision mixed_bfloat16 --eval_files 'heldout_128/part-*'

The paper's recipe (Appendix A.2): Adam(W) with lr 1e-4, beta1 0.9, beta2 0.999,
epsilon 1e-6, weight decay 0.01 (not on LayerNorm or biases), 10k warmup steps then
linear decay, gradients clipped to global norm 1.0; 90% of the steps at sequence length
128, the last 10% at 512 (phase 2, its own records; the learning-rate schedule runs on
across both phases).

How a step works. Every worker reads the whole global batch from its own copy of the
input pipeline (same files, same seed) and hands each replica its rows. The losses are
sums divided by the global batch's counts (`pretraining_model.pretraining_loss`), so the
replicas' gradients add up to the single-device gradient; they are summed across
replicas, then clipped to the global norm, then applied. With `grad_accum_steps` k each
replica runs its rows as k micro-batches in sequence and sums their gradients.

Exact resumption. A checkpoint holds the model (dropout seed states included), the
optimizer, the step and the position of the input pipeline (a `tf.data` iterator, which
is checkpointable; tf.distribute's own distributed iterators are not, which is why the
batch is split by hand as above). A run killed at any moment restarts from the last
checkpoint and computes exactly what the uninterrupted run computed (tested with
kill -9). Phase-1 and phase-2 runs resume alike: a checkpoint at step s holds the
iterator of the phase that step s + 1 belongs to. Not restored: the random masks of
`--dynamic_masking` (stateful random ops in the input pipeline).

Written to --model_dir (only by the chief worker):
  pretrain_config.json   the resolved configuration and the command
  metrics.csv            one row per log interval ("train") and per evaluation ("eval")
  tensorboard/{train,eval}/   the same as TensorBoard scalars
  eval_results.json      the final held-out metrics (masked-LM perplexity = Table 6's)
and to --export_dir (default model_dir/export): the encoder and heads in our checkpoint
format (config.json, weights.safetensors, vocab.txt), glue_suite's `--init_checkpoint`;
with --export_steps S1,S2,... the same export of the model after step S, beside it as
export_<S>/ (Figure 5's fine-tuning accuracy against pretraining steps);
to --checkpoint_dir (default model_dir/checkpoints): tf.train checkpoints, the last K.
"""

import argparse
import csv
import dataclasses
import io
import json
import os
import shlex
import sys
import tempfile
import time
from typing import Optional

import keras
import tensorflow as tf

from bert_tf import distribute
from bert_tf.checkpoints import save_checkpoint
from bert_tf.config import SIZES, config_for_size
from bert_tf.create_pretraining_data import make_pretraining_dataset
from bert_tf.dynamic_masking import DynamicMasking
from bert_tf.optimization import OPTIMIZERS, create_optimizer
from bert_tf.pretraining_model import (OBJECTIVES, SUM_KEYS, BertPretrainer, mean_metrics,
                                       prediction_targets, pretraining_loss)
from bert_tf.tokenization import BertTokenizer

SUM = tf.distribute.ReduceOp.SUM
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
CSV_COLUMNS = ("step", "split", "loss", "mlm_loss", "mlm_accuracy", "mlm_perplexity",
               "nsp_loss", "nsp_accuracy", "learning_rate", "grad_norm",
               "examples_per_second", "elapsed_seconds")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Everything a pretraining run depends on (written to model_dir/pretrain_config.json).

    Args:
        model_size: a row of `config.SIZES` ("tiny" ... "large", Table 6 sizes).
        objective: "nsp", "no_nsp" or "ltr" (see `pretraining_model`).
        train_files: comma-separated globs of phase-1 TFRecords.
        vocab_file: the WordPiece vocabulary the records were made with; sets vocab_size
            and is exported with the model.
        model_dir: metrics, TensorBoard logs, the export.
        checkpoint_dir: tf.train checkpoints; None: model_dir/checkpoints.
        export_dir: the final model in our checkpoint format; None: model_dir/export.
        export_steps: also export the model after each of these steps, to export_<S>/
            beside the final export (`step_export_dir`).
        global_batch_size: examples per optimizer step, over all replicas.
        num_train_steps: optimizer steps, both phases together.
        max_seq_length, max_predictions_per_seq: T and P of the phase-1 records.
        phase2_train_files: records for the last `phase2_fraction` of the steps, of
            length `phase2_seq_length` with `phase2_max_predictions_per_seq`; None: one phase.
        learning_rate, num_warmup_steps, weight_decay, optimizer: see `optimization`.
        clip_norm: clip the summed gradient to this global norm (0: no clipping).
        save_checkpoints_steps: checkpoint every this many steps; keep_checkpoints: keep K.
        steps_per_execution: optimizer steps per call of the compiled training function.
        grad_accum_steps: micro-batches per replica and step (same result, less memory).
        precision: "float32", "mixed_bfloat16" (TPU, recent CPUs) or "mixed_float16"
            (GPU; with dynamic loss scaling).
        jit_compile: XLA-compile the forward and backward pass.
        eval_files: held-out records (phase-1 shape); None: no evaluation.
        eval_steps: batches per evaluation (0: all of eval_files).
        eval_every: steps between evaluations; 0: save_checkpoints_steps.
        log_every: steps between log lines / metric rows.
        seed: initialisation, dropout and data order.
        dropout: overrides both dropout rates of the model size (None: 0.1 as in BERT).
        dynamic_masking, masked_lm_prob, mask_rates: mask each batch anew in the input
            pipeline (`dynamic_masking.DynamicMasking`) with these rates.
    """

    model_size: str
    objective: str
    train_files: str
    vocab_file: str
    model_dir: str
    checkpoint_dir: Optional[str] = None
    export_dir: Optional[str] = None
    export_steps: tuple = ()
    global_batch_size: int = 256
    num_train_steps: int = 1_000_000
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    phase2_train_files: Optional[str] = None
    phase2_seq_length: int = 512
    phase2_max_predictions_per_seq: int = 80
    phase2_fraction: float = 0.1
    learning_rate: float = 1e-4
    num_warmup_steps: int = 10_000
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    optimizer: str = "adamw"
    save_checkpoints_steps: int = 1000
    keep_checkpoints: int = 5
    steps_per_execution: int = 1
    grad_accum_steps: int = 1
    precision: str = "float32"
    jit_compile: bool = False
    eval_files: Optional[str] = None
    eval_steps: int = 100
    eval_every: int = 0
    log_every: int = 100
    seed: int = 12345
    dropout: Optional[float] = None
    dynamic_masking: bool = False
    masked_lm_prob: float = 0.15
    mask_rates: tuple = (0.8, 0.1, 0.1)

    def __post_init__(self):
        checks = [
            (self.model_size in SIZES, f"model_size must be one of {', '.join(SIZES)}"),
            (self.objective in OBJECTIVES, f"objective must be one of {OBJECTIVES}"),
            (self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}"),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}"),
            (self.num_train_steps > 0, "num_train_steps must be positive"),
            (0 <= self.num_warmup_steps <= self.num_train_steps,
             "num_warmup_steps must lie in [0, num_train_steps]"),
            (0 < self.phase2_fraction < 1, "phase2_fraction must lie in (0, 1)"),
            (min(self.global_batch_size, self.steps_per_execution, self.grad_accum_steps,
                 self.save_checkpoints_steps, self.keep_checkpoints, self.log_every) > 0,
             "batch size, steps_per_execution, grad_accum_steps, save_checkpoints_steps, "
             "keep_checkpoints and log_every must be positive"),
            (self.global_batch_size % self.grad_accum_steps == 0,
             "global_batch_size must be divisible by grad_accum_steps"),
            (all(0 < s <= self.num_train_steps for s in self.export_steps),
             "export_steps must lie in [1, num_train_steps]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"{message}; got {self}")

    @property
    def final_export_dir(self) -> str:
        return self.export_dir or os.path.join(self.model_dir, "export")

    def step_export_dir(self, step: int) -> str:
        """export_<step>/ beside the final export (model_dir/export_<step> by default)."""
        return os.path.join(os.path.dirname(self.final_export_dir.rstrip("/")),
                            f"export_{step}")

    @property
    def phase1_steps(self) -> int:
        if not self.phase2_train_files:
            return self.num_train_steps
        return self.num_train_steps - round(self.num_train_steps * self.phase2_fraction)

    def phase_of(self, step: int) -> int:
        """The phase (1 or 2) that the step after `step` steps belongs to."""
        return 2 if self.phase2_train_files and step >= self.phase1_steps else 1

    def phase_data(self, phase: int) -> tuple:
        """(files, max_seq_length, max_predictions_per_seq) of a phase."""
        if phase == 1:
            return self.train_files, self.max_seq_length, self.max_predictions_per_seq
        return (self.phase2_train_files, self.phase2_seq_length,
                self.phase2_max_predictions_per_seq)


class Trainer:
    """Builds the model, optimizer and inputs of a `PretrainConfig` on a strategy, and
    runs, checkpoints, evaluates and exports it. `train()` does it all."""

    def __init__(self, config: PretrainConfig, strategy: tf.distribute.Strategy):
        self.config = config
        self.strategy = strategy
        self.num_replicas = strategy.num_replicas_in_sync
        if config.global_batch_size % (self.num_replicas * config.grad_accum_steps):
            raise ValueError(
                f"global_batch_size={config.global_batch_size} must be divisible by "
                f"replicas ({self.num_replicas}) x grad_accum_steps "
                f"({config.grad_accum_steps})")
        self.is_chief = distribute.is_chief(strategy)
        self.checkpoint_dir = config.checkpoint_dir or os.path.join(config.model_dir,
                                                                    "checkpoints")
        tokenizer = BertTokenizer(config.vocab_file)
        self.lower_case = tokenizer.lower_case

        keras.utils.set_random_seed(config.seed)  # weights, dropout seeds, dynamic masks
        overrides = {} if config.dropout is None else {
            "hidden_dropout_prob": config.dropout, "attention_probs_dropout_prob": config.dropout}
        bert_config = BertPretrainer.config_for(
            config_for_size(config.model_size, vocab_size=tokenizer.vocab_size, **overrides),
            config.objective)
        with strategy.scope():
            self.model = BertPretrainer(bert_config, config.objective, dtype=config.precision)
            self.model.build()
            # Clipping is done here, after the cross-replica sum; Keras's own
            # global_clipnorm would clip each replica's partial gradient instead.
            optimizer = create_optimizer(
                config.learning_rate, config.num_train_steps, config.num_warmup_steps,
                weight_decay=config.weight_decay, optimizer=config.optimizer)
            if config.precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

        self.tokenizer = tokenizer
        self._gradients = tf.function(self._micro_batch_gradients,
                                      jit_compile=config.jit_compile)
        self._train_steps = tf.function(self._train_steps_fn)
        self._eval_step = tf.function(self._eval_step_fn)
        self.phase = None

    # ------------------------------------------------------------------ one step
    def _distribute(self, batch: dict):
        """The global batch (on every worker) -> each replica's rows."""
        rows = self.config.global_batch_size // self.num_replicas

        def replica_rows(context):
            start = context.replica_id_in_sync_group * rows
            return {name: value[start:start + rows] for name, value in batch.items()}

        return self.strategy.experimental_distribute_values_from_function(replica_rows)

    def _micro_batch_gradients(self, features, mlm_count, nsp_count):
        """This replica's rows -> (gradient of its share of the global loss, loss sums),
        over `grad_accum_steps` micro-batches run one after another."""
        variables = self.model.trainable_variables
        k = self.config.grad_accum_steps

        def gradients(micro_batch):
            with tf.GradientTape() as tape:
                sums = self.model.loss_sums(micro_batch, training=True)
                loss = pretraining_loss(sums, mlm_count, nsp_count)
                loss = self.optimizer.scale_loss(loss)  # x loss scale with mixed_float16
            grads = tape.gradient(loss, variables)
            return [tf.convert_to_tensor(g) for g in grads], sums

        if k == 1:
            return gradients(features)
        micro_batches = {name: tf.reshape(value, [k, -1, *value.shape[1:]])
                         for name, value in features.items()}  # [k, rows / k, ...]
        total_grads = [tf.zeros(v.shape, v.dtype) for v in variables]
        total_sums = {key: tf.constant(0.0) for key in SUM_KEYS}
        for i in tf.range(k):
            grads, sums = gradients({name: value[i] for name, value in micro_batches.items()})
            total_grads = [a + g for a, g in zip(total_grads, grads)]
            total_sums = {key: total_sums[key] + sums[key] for key in SUM_KEYS}
        return total_grads, total_sums

    def _replica_train_step(self, features):
        context = tf.distribute.get_replica_context()
        _, _, weights = prediction_targets(features, self.config.objective)
        # The global batch's counts, so that every part's loss is its share of the mean.
        mlm_count = context.all_reduce(SUM, tf.reduce_sum(weights))
        nsp_count = float(self.config.global_batch_size)
        grads, sums = self._gradients(features, mlm_count, nsp_count)
        grads = context.all_reduce(SUM, grads)  # the global batch's gradient
        grad_norm = tf.linalg.global_norm(grads) / self.optimizer.scale_loss(1.0)
        scale = 1.0 / self.num_replicas
        if self.config.clip_norm:
            scale *= self.config.clip_norm / tf.maximum(grad_norm, self.config.clip_norm)
        # Keras optimizers sum gradients over replicas inside apply(); ours are summed
        # already, so each replica passes its 1/N share of the clipped sum.
        self.optimizer.apply([g * scale for g in grads], self.model.trainable_variables)
        return {**_all_reduce_sums(sums), "grad_norm": grad_norm}

    def _train_steps_fn(self, iterator, num_steps):
        """Runs `num_steps` optimizer steps in one call; returns their summed loss terms."""
        totals = {key: tf.constant(0.0) for key in (*SUM_KEYS, "grad_norm")}
        for _ in tf.range(num_steps):
            sums = self.strategy.run(self._replica_train_step,
                                     args=(self._distribute(next(iterator)),))
            sums = self._first_replica(sums)
            totals = {key: totals[key] + sums[key] for key in totals}
            self.step.assign_add(1)
        return totals

    def _eval_step_fn(self, batch):
        def replica_sums(features):
            return _all_reduce_sums(self.model.loss_sums(features, training=False))

        return self._first_replica(self.strategy.run(replica_sums, args=(self._distribute(batch),)))

    def _first_replica(self, values):
        """Values that are the same on every replica (all-reduced) -> one copy."""
        return tf.nest.map_structure(lambda v: self.strategy.experimental_local_results(v)[0],
                                     values)

    # ------------------------------------------------------------------ inputs, checkpoints
    def _masking(self, max_predictions_per_seq: int):
        """With --dynamic_masking: the masking function for the input pipeline."""
        if not self.config.dynamic_masking:
            return None
        t = self.tokenizer
        return DynamicMasking(t.vocab_size, t.mask_id, [t.cls_id, t.sep_id, t.pad_id],
                              max_predictions_per_seq, self.config.masked_lm_prob,
                              self.config.mask_rates)

    def _train_dataset(self, phase: int) -> tf.data.Dataset:
        files, seq_length, predictions = self.config.phase_data(phase)
        return make_pretraining_dataset(files, self.config.global_batch_size, seq_length,
                                        predictions, is_training=True, seed=self.config.seed,
                                        dynamic_masking=self._masking(predictions))

    def _enter_phase(self, phase: int) -> None:
        """Opens the phase's input pipeline, and a checkpoint that includes its position."""
        if phase == self.phase:
            return
        self.phase = phase
        self.iterator = iter(self._train_dataset(phase))
        self.checkpoint = tf.train.Checkpoint(
            # The optimizer's slot names embed the model's auto-numbered name; its
            # variables are listed in a fixed order (that of the trainable variables).
            model=_by_name(self.model.variables),
            optimizer=[v.value for v in self.optimizer.variables],
            step=self.step, data=self.iterator)
        # Non-chief workers must take part in saving (variables may need their
        # collectives) but write to a scratch directory that is removed afterwards.
        directory = self.checkpoint_dir if self.is_chief else os.path.join(
            self.checkpoint_dir, f".worker_{distribute.worker_id(self.strategy)}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                                  max_to_keep=self.config.keep_checkpoints)

    def restore(self) -> int:
        """Restores the latest checkpoint in checkpoint_dir, if any; returns the step."""
        latest = tf.train.latest_checkpoint(self.checkpoint_dir)
        if latest is None:
            self._enter_phase(1)
            return 0
        step = int(tf.train.load_checkpoint(latest).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))
        self._enter_phase(self.config.phase_of(step))
        self.checkpoint.restore(latest).assert_consumed()
        return int(self.step.numpy())

    def save(self) -> None:
        self.manager.save(checkpoint_number=int(self.step.numpy()))
        if not self.is_chief:
            tf.io.gfile.rmtree(self.manager.directory)

    # ------------------------------------------------------------------ evaluation, export
    def evaluate(self) -> dict:
        """Held-out metrics on eval_files: MLM loss, accuracy and perplexity (for "ltr",
        of the next token), NSP loss and accuracy; the same batches every time."""
        config = self.config
        if config.dynamic_masking:
            tf.random.set_seed(config.seed)  # the same random masks at every evaluation
        dataset = make_pretraining_dataset(
            config.eval_files, config.global_batch_size, config.max_seq_length,
            config.max_predictions_per_seq, is_training=False,
            dynamic_masking=self._masking(config.max_predictions_per_seq))
        if config.eval_steps:
            dataset = dataset.take(config.eval_steps)
        totals = None
        for batch in dataset:
            sums = self._eval_step(batch)
            totals = sums if totals is None else {k: totals[k] + sums[k] for k in totals}
        if totals is None:
            raise ValueError(f"--eval_files {config.eval_files!r} hold fewer than one batch "
                             f"({config.global_batch_size}) of records")
        return mean_metrics({k: float(v) for k, v in totals.items()})

    def export(self, directory: str) -> None:
        """Encoder + MLM + NSP heads in our checkpoint format, for fine-tuning."""
        if "://" not in directory:
            save_checkpoint(directory, self.model.heads(), self.config.vocab_file,
                            self.lower_case, heads=True)
            return
        with tempfile.TemporaryDirectory() as local:  # e.g. gs://: write locally, copy
            save_checkpoint(local, self.model.heads(), self.config.vocab_file,
                            self.lower_case, heads=True)
            tf.io.gfile.makedirs(directory)
            for name in os.listdir(local):
                tf.io.gfile.copy(os.path.join(local, name), f"{directory}/{name}",
                                 overwrite=True)

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.learning_rate)

    # ------------------------------------------------------------------ the loop
    def train(self, log=print) -> dict:
        """Trains to num_train_steps (resuming from checkpoint_dir), evaluating and
        checkpointing on the way; exports at the end. Returns the final held-out metrics
        (or the last training metrics without eval_files)."""
        config = self.config
        log = log if self.is_chief else (lambda line: None)
        step = self.restore()
        metrics_log = MetricsLog(config.model_dir, enabled=self.is_chief, after_step=step)
        log(f"{'resuming at' if step else 'starting'} step {step} of "
            f"{config.num_train_steps} on {self.num_replicas} replica(s); phase {self.phase}")
        eval_every = config.eval_every or config.save_checkpoints_steps
        window, window_steps, window_seconds = None, 0, 0.0
        train_metrics, eval_metrics, start = {}, None, time.time()
        while step < config.num_train_steps:
            self._enter_phase(config.phase_of(step))
            events = [config.num_train_steps, config.phase1_steps, _next_multiple(
                step, config.log_every), _next_multiple(step, config.save_checkpoints_steps)]
            if config.eval_files:
                events.append(_next_multiple(step, eval_every))
            events += config.export_steps
            num_steps = min([step + config.steps_per_execution] +
                            [e for e in events if e > step]) - step
            call_start = time.time()
            sums = self._train_steps(self.iterator, tf.constant(num_steps))
            sums = {k: float(v) for k, v in sums.items()}  # waits for the steps to finish
            window_seconds += time.time() - call_start
            step += num_steps
            window = sums if window is None else {k: window[k] + sums[k] for k in window}
            window_steps += num_steps

            done = step == config.num_train_steps
            if step % config.log_every == 0 or done:
                # Examples/s counts training calls only (the first includes tracing).
                train_metrics = mean_metrics(window)
                train_metrics.update(
                    learning_rate=self.learning_rate,
                    grad_norm=window["grad_norm"] / window_steps,
                    examples_per_second=window_steps * config.global_batch_size / window_seconds)
                log(_format(step, config.num_train_steps, train_metrics))
                metrics_log.write(step, "train", train_metrics, time.time() - start)
                window, window_steps, window_seconds = None, 0, 0.0
            self._enter_phase(config.phase_of(step))
            # Export before checkpointing: a run killed in between redoes the steps up to
            # here, so no checkpoint lies beyond a step export that was not written.
            if step in config.export_steps and self.is_chief:
                self.export(config.step_export_dir(step))
                log(f"exported step {step} to {config.step_export_dir(step)}")
            if step % config.save_checkpoints_steps == 0 or done:
                self.save()
            if config.eval_files and (step % eval_every == 0 or done):
                eval_metrics = self.evaluate()
                log(_format(step, config.num_train_steps, eval_metrics, "eval"))
                metrics_log.write(step, "eval", eval_metrics, time.time() - start)

        if config.eval_files and eval_metrics is None:  # resumed a finished run
            eval_metrics = self.evaluate()
        final = eval_metrics or train_metrics
        if self.is_chief:
            self.export(config.final_export_dir)
            _write_json(os.path.join(config.model_dir, "eval_results.json"),
                        {"step": step, **final})
        metrics_log.close()
        return final


def _all_reduce_sums(sums: dict) -> dict:
    """Replica context: loss sums over the global batch, in one all-reduce."""
    total = tf.distribute.get_replica_context().all_reduce(
        SUM, tf.stack([sums[key] for key in SUM_KEYS]))
    return dict(zip(SUM_KEYS, tf.unstack(total)))


def _by_name(variables) -> dict:
    """{name: variable} of a Keras 3 model for tf.train.Checkpoint, which does not find
    every variable through the model's attributes (lists of layers, dropout seeds).

    Names must not depend on what else the process built, so they are the Keras paths
    without the model's own (auto-numbered) name, and dropout seed states, which Keras
    names by a process-wide counter ("seed_generator_7/..."), are numbered in model order.
    """
    named, seeds = {}, 0
    for v in variables:
        name = v.path.split("/", 1)[1]
        if name.endswith("seed_generator_state"):
            name, seeds = f"seed_generator_state_{seeds}", seeds + 1
        if name in named:
            raise ValueError(f"two variables are called {name!r}")
        named[name] = v.value
    return named


def _next_multiple(step: int, every: int) -> int:
    return (step // every + 1) * every


def _format(step: int, total: int, metrics: dict, split: str = "train") -> str:
    parts = [f"{split} step {step}/{total}", f"loss {metrics['loss']:.4f}",
             f"mlm {metrics['mlm_loss']:.4f} acc {metrics['mlm_accuracy']:.4f}"]
    if "nsp_loss" in metrics:
        parts.append(f"nsp {metrics['nsp_loss']:.4f} acc {metrics['nsp_accuracy']:.4f}")
    if split == "eval":
        parts.append(f"perplexity {metrics['mlm_perplexity']:.2f}")
    else:
        parts += [f"lr {metrics['learning_rate']:.3g}", f"gnorm {metrics['grad_norm']:.3f}",
                  f"{metrics['examples_per_second']:.1f} ex/s"]
    return " | ".join(parts)


def _write_json(path: str, values: dict) -> None:
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(values, indent=2, sort_keys=True) + "\n")


class MetricsLog:
    """metrics.csv and TensorBoard scalars in model_dir.

    The CSV is rewritten whole on every write (object stores such as gs:// cannot
    append); rows after the step a run resumes from are dropped, since it redoes them.
    """

    def __init__(self, model_dir: str, enabled: bool, after_step: int):
        self.enabled = enabled
        if not enabled:
            return
        tf.io.gfile.makedirs(model_dir)
        self.path = os.path.join(model_dir, "metrics.csv")
        self.rows = []
        if tf.io.gfile.exists(self.path):
            with tf.io.gfile.GFile(self.path) as f:
                self.rows = [row for row in csv.DictReader(f) if int(row["step"]) <= after_step]
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
        with tf.io.gfile.GFile(self.path + ".tmp", "w") as f:
            f.write(text.getvalue())
        tf.io.gfile.rename(self.path + ".tmp", self.path, overwrite=True)

    def close(self) -> None:
        if self.enabled:
            for writer in self.writers.values():
                writer.close()


def pretrain(config: PretrainConfig, strategy: Optional[tf.distribute.Strategy] = None,
             command: Optional[str] = None, log=print) -> dict:
    """Runs (or resumes) a pretraining run; returns the final metrics.

    Args:
        config: the run.
        strategy: default: the current (default) strategy, i.e. one device.
        command: the command line, recorded in pretrain_config.json.
    """
    strategy = strategy or tf.distribute.get_strategy()
    trainer = Trainer(config, strategy)
    if trainer.is_chief:
        tf.io.gfile.makedirs(config.model_dir)
        _write_json(os.path.join(config.model_dir, "pretrain_config.json"),
                    {**dataclasses.asdict(config), "command": command,
                     "num_replicas": strategy.num_replicas_in_sync,
                     "bert_config": trainer.model.config.to_dict()})
    return trainer.train(log=log)


# ---------------------------------------------------------------------------- command line
def _parse_args(argv):
    defaults = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}
    p = argparse.ArgumentParser(prog="python -m bert_tf.pretrain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, choices=list(SIZES), help="model size")
    p.add_argument("--objective", choices=OBJECTIVES, default="nsp")
    p.add_argument("--train_files", required=True, help="comma-separated TFRecord globs")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--model_dir", required=True)
    p.add_argument("--checkpoint_dir", help="default: MODEL_DIR/checkpoints")
    p.add_argument("--export_dir", help="default: MODEL_DIR/export")
    p.add_argument("--export_steps", default="",
                   help="comma-separated steps after which to also export the model, to "
                        "export_<STEP>/ beside the final export (default: none)")
    p.add_argument("--strategy", choices=distribute.STRATEGIES, default="cpu")
    p.add_argument("--tpu", help="with --strategy tpu: TPU name, grpc://host:port or local")
    for name in ("global_batch_size", "num_train_steps", "max_seq_length",
                 "max_predictions_per_seq", "phase2_seq_length", "phase2_max_predictions_per_seq",
                 "num_warmup_steps", "save_checkpoints_steps", "keep_checkpoints",
                 "steps_per_execution", "grad_accum_steps", "eval_steps", "eval_every",
                 "log_every", "seed"):
        p.add_argument(f"--{name}", type=int, default=defaults[name])
    for name in ("phase2_fraction", "learning_rate", "weight_decay", "clip_norm",
                 "masked_lm_prob"):
        p.add_argument(f"--{name}", type=float, default=defaults[name])
    p.add_argument("--dropout", type=float, default=None,
                   help="both dropout rates (default: the model size's, 0.1)")
    p.add_argument("--phase2_train_files", help="phase-2 (long sequence) TFRecord globs")
    p.add_argument("--eval_files", help="held-out TFRecord globs (phase-1 shape)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--precision", choices=PRECISIONS, default="float32")
    p.add_argument("--jit_compile", action="store_true")
    p.add_argument("--dynamic_masking", action="store_true",
                   help="mask each batch anew (records written with --dynamic_masking)")
    p.add_argument("--mask_rates", default="0.8,0.1,0.1",
                   help="with --dynamic_masking: [MASK], same, random fractions")
    return p.parse_args(argv)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse_args(argv)
    try:
        values = {k: v for k, v in vars(args).items() if k not in ("config", "strategy", "tpu")}
        values["mask_rates"] = tuple(float(r) for r in args.mask_rates.split(","))
        values["export_steps"] = tuple(sorted({int(s) for s in args.export_steps.split(",")
                                               if s.strip()}))
        config = PretrainConfig(model_size=args.config, **values)
        strategy = distribute.create_strategy(args.strategy, args.tpu)
    except ValueError as e:
        sys.exit(f"error: {e}")
    pretrain(config, strategy, command="python -m bert_tf.pretrain " + shlex.join(argv),
             log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
