"""The pretraining loop on tf.distribute: steps, checkpoints, evaluation and export of a
`PretrainConfig` (`python -m bert_tf.pretrain` runs it).

How a step works. Each host (a machine's CPU, feeding its GPUs or TPU cores) runs one
input pipeline that reads its own part of the data (`bert_tf.distribute.InputLayout`) and
yields the host's rows of the global batch; each of its replicas takes its block of those
rows. One host (a CPU, a GPU machine, a TPU v3-8) reads the whole global batch. The losses are
sums divided by the global batch's counts (`pretraining_model.pretraining_loss`), so the
replicas' gradients add up to the single-device gradient; they are summed across
replicas, then clipped to the global norm, then applied. With `grad_accum_steps` k each
replica runs its rows as k micro-batches in sequence and sums their gradients.

Exact resumption. A checkpoint holds the model (dropout seed states included), the
optimizer, the step and the position of every input pipeline (`tf.data` iterators, which
are checkpointable; tf.distribute's own distributed iterators are not, which is why the
batch is split by hand as above). With several workers (MultiWorker), each worker writes
its own pipeline's position beside the chief's checkpoint, under the same step number
(`input_pipeline_<id>/`). A run killed at any moment restarts from the last
checkpoint and computes exactly what the uninterrupted run computed (tested with
kill -9). Phase-1 and phase-2 runs resume alike: a checkpoint at step s holds the
iterator of the phase that step s + 1 belongs to. Not restored: the random masks of
`--dynamic_masking` (stateful random ops in the input pipeline). SIGTERM or Ctrl-C stops
a run after its running step, with a checkpoint at that step (`TrainingStopped`), so a
stop loses no steps; the training log's next row then covers only the steps after it.
"""

import functools
import os
import tempfile
import time
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from bert_tf import distribute
from bert_tf.cli import StopSignals
from bert_tf.checkpoints import Checkpoint, assign_weights, save_checkpoint
from bert_tf.config import BertConfig, config_for_size
from bert_tf.dynamic_masking import DynamicMasking
from bert_tf.files import write_json, write_text
from bert_tf.init_checkpoint import read_init_checkpoint
from bert_tf.metrics_log import MetricsLog, format_metrics
from bert_tf.optimization import create_optimizer
from bert_tf.plateau import plateau_message, target_counts, unigram_entropy, unigram_log_probs
from bert_tf.pretrain_config import PretrainConfig
from bert_tf.pretraining_dataset import make_pretraining_dataset, records_are_unmasked
from bert_tf.pretraining_model import (SUM_KEYS, BertPretrainer, mean_metrics,
                                       prediction_targets, pretraining_loss,
                                       sample_next_token_positions)
from bert_tf.tokenization import BertTokenizer

SUM = tf.distribute.ReduceOp.SUM
_ENTROPY_RECORDS = 51_200  # records read for the unigram entropy (about 1M targets)
HELDOUT_LOSSES = "heldout_losses.tsv"


def heldout_masked_in_pipeline(config: PretrainConfig) -> bool:
    """Whether evaluation masks the held-out records itself: only a --dynamic_masking run,
    and only when they were written unmasked. Records that hold their masks are scored on
    those, so runs with and without dynamic masking predict the same held-out tokens."""
    return bool(config.dynamic_masking and config.eval_files
                and records_are_unmasked(config.eval_files))


class TrainingStopped(Exception):
    """Training stopped on a signal at `step`, with a checkpoint there; `exit_code` is
    the shell's code for the signal."""

    def __init__(self, step: int, exit_code: int):
        super().__init__(f"stopped at step {step}")
        self.step, self.exit_code = step, exit_code


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
        self.layout = distribute.input_layout(strategy)
        # eval_every 0: evaluate whenever a checkpoint is saved.
        self.eval_every = config.eval_every or config.save_checkpoints_steps
        self.checkpoint_dir = config.checkpoints
        # --init_checkpoint: read (and its vocabulary checked) now, loaded by restore().
        self.init = None if not config.init_checkpoint else read_init_checkpoint(
            config.init_checkpoint, config.vocab_file,
            [config.train_files, config.phase2_train_files, config.eval_files])
        self.vocab_file = config.vocab_file or self.init.vocab_file
        tokenizer = BertTokenizer(self.vocab_file,
                                  lower_case=self.init.lower_case if self.init else None)
        self.lower_case = tokenizer.lower_case

        keras.utils.set_random_seed(config.seed)  # weights, dropout seeds, dynamic masks
        bert_config = BertPretrainer.config_for(
            _model_config(config, tokenizer.vocab_size, self.init), config.objective)
        with strategy.scope():
            self.model = BertPretrainer(bert_config, config.objective, dtype=config.precision)
            self.model.build()
            # Clipping is done here, after the cross-replica sum; Keras's own
            # global_clipnorm would clip each replica's partial gradient instead.
            optimizer = create_optimizer(
                config.learning_rate, config.num_train_steps, config.num_warmup_steps,
                weight_decay=config.weight_decay, beta_2=config.adam_beta2,
                optimizer=config.optimizer)
            if config.precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

        self.tokenizer = tokenizer
        # XLA and TPUs need static shapes; elsewhere the masked LM skips padding slots.
        self.dynamic_shapes = not (config.jit_compile
                                   or isinstance(strategy, tf.distribute.TPUStrategy))
        self._gradients = tf.function(self._micro_batch_gradients,
                                      jit_compile=config.jit_compile)
        self._train_steps = tf.function(self._train_steps_fn)
        self._eval_step = tf.function(self._eval_step_fn)
        self.phase = None
        self.plateau = {}  # the plateau check's outcome, once made (`_check_plateau`)
        self.heldout_masked_in_pipeline = heldout_masked_in_pipeline(config)  # read once
        self.heldout_examples = None  # per-sequence loss terms of the last evaluation

    # ------------------------------------------------------------------ one step
    def _distribute(self, host_batches: list):
        """Each host's batch (`self.layout`'s hosts, in order) -> each replica's rows."""
        return self._replica_rows(lambda replica: self.layout.rows[replica], host_batches)

    def _distribute_global(self, batch: dict):
        """The global batch (read whole on every host) -> each replica's rows."""
        return self._replica_rows(lambda replica: (0, replica), [batch])

    def _replica_rows(self, block_of, batches: list):
        """Replica r takes block `b` (of global_batch / replicas rows) of batches[h],
        where (h, b) = block_of(r)."""
        rows = self.config.global_batch_size // self.num_replicas

        def replica_rows(context):
            h, block = block_of(context.replica_id_in_sync_group)
            return {name: value[block * rows:(block + 1) * rows]
                    for name, value in batches[h].items()}

        return self.strategy.experimental_distribute_values_from_function(replica_rows)

    def _micro_batch_gradients(self, features, mlm_count, nsp_count):
        """This replica's rows -> (gradient of its share of the global loss, loss sums),
        over `grad_accum_steps` micro-batches run one after another."""
        variables = self.model.trainable_variables
        k = self.config.grad_accum_steps

        def gradients(micro_batch):
            with tf.GradientTape() as tape:
                sums = self.model.loss_sums(micro_batch, training=True,
                                            only_weighted=self.dynamic_shapes)
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

    def _train_steps_fn(self, iterators, num_steps):
        """Runs `num_steps` optimizer steps in one call, on batches from `iterators` (one
        per host of `self.layout`); returns their summed loss terms."""
        totals = {key: tf.constant(0.0) for key in (*SUM_KEYS, "grad_norm")}
        for _ in tf.range(num_steps):
            batches = [next(iterator) for iterator in iterators]
            sums = self.strategy.run(self._replica_train_step,
                                     args=(self._distribute(batches),))
            sums = self._first_replica(sums)
            totals = {key: totals[key] + sums[key] for key in totals}
            self.step.assign_add(1)
        return totals

    def _eval_step_fn(self, batch):
        """-> {SUM_KEYS: [global batch]}: each example's loss terms, in batch order."""
        def replica_sums(features):
            context = tf.distribute.get_replica_context()
            sums = self.model.example_sums(features, training=False,
                                           only_weighted=self.dynamic_shapes)
            return {key: context.all_gather(value, axis=0) for key, value in sums.items()}

        return self._first_replica(self.strategy.run(replica_sums,
                                                     args=(self._distribute_global(batch),)))

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

    def _train_dataset(self, phase: int, pipeline_id: int) -> tf.data.Dataset:
        files, seq_length, predictions = self.config.phase_data(phase)
        # LTR's sampled next tokens are drawn in the pipeline as dynamic masks are:
        # per batch, from a seeded stream that the iterator checkpoint resumes.
        transform = (sample_next_token_positions(self.config.ltr_predictions)
                     if self.config.ltr_predictions else self._masking(predictions))
        num_pipelines = self.layout.num_pipelines
        return make_pretraining_dataset(files, self.config.global_batch_size // num_pipelines,
                                        seq_length, predictions, is_training=True,
                                        seed=self.config.seed,
                                        pipeline=(pipeline_id, num_pipelines),
                                        batch_transform=transform)

    def _enter_phase(self, phase: int) -> None:
        """Opens the phase's input pipelines (one per host, each on its host's CPU), and a
        checkpoint that includes their positions."""
        if phase == self.phase:
            return
        self.phase = phase
        self.iterators = []
        for host, pipeline_id in zip(self.layout.hosts, self.layout.pipeline_ids):
            with tf.device(host):
                self.iterators.append(iter(self._train_dataset(phase, pipeline_id)))
        # Several processes (MultiWorker): each saves its own pipeline's position, beside
        # the checkpoint and under its step number; one process holds them all in it (one
        # pipeline as a lone iterator: the layout of checkpoints from before per-host input).
        positions = self.iterators[0] if len(self.iterators) == 1 else self.iterators
        data = {} if self.layout.multi_client else {"data": positions}
        self.checkpoint = tf.train.Checkpoint(
            # The optimizer's slot names embed the model's auto-numbered name; its
            # variables are listed in a fixed order (that of the trainable variables).
            model=_by_name(self.model.variables),
            optimizer=[v.value for v in self.optimizer.variables],
            step=self.step, **data)
        # Non-chief workers must take part in saving (variables may need their
        # collectives) but write to a scratch directory that is removed afterwards.
        directory = self.checkpoint_dir if self.is_chief else os.path.join(
            self.checkpoint_dir, f".worker_{distribute.worker_id(self.strategy)}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                                  max_to_keep=self.config.keep_checkpoints)
        self.input_manager = None
        if self.layout.multi_client:
            (pipeline_id,) = self.layout.pipeline_ids
            self.input_manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(data=self.iterators),
                os.path.join(self.checkpoint_dir, f"input_pipeline_{pipeline_id}"),
                max_to_keep=self.config.keep_checkpoints)

    def restore(self) -> int:
        """Restores the latest checkpoint in checkpoint_dir, if any; returns the step.
        Without one, the run starts at step 0, from --init_checkpoint if given."""
        latest = tf.train.latest_checkpoint(self.checkpoint_dir)
        if latest is None:
            self._enter_phase(1)
            if self.init is not None:  # the encoder, and the heads the checkpoint has
                assign_weights(self.model.heads(), self.init.weights, heads=self.init.heads)
            if self.config.output_bias_init == "unigram" and not (
                    self.init is not None and "mlm" in self.init.heads):
                self.model.mlm.output_bias.assign(unigram_log_probs(self._target_counts))
            return 0
        step = int(tf.train.load_checkpoint(latest).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))
        self._enter_phase(self.config.phase_of(step))
        self.checkpoint.restore(latest).assert_consumed()
        if self.input_manager is not None:
            position = os.path.join(self.input_manager.directory, f"ckpt-{step}")
            if not tf.io.gfile.exists(position + ".index"):
                raise ValueError(f"{latest} (step {step}) has no input position for this "
                                 f"worker: {position} is missing (were there other workers?)")
            self.input_manager.checkpoint.restore(position).assert_consumed()
        return int(self.step.numpy())

    def save(self) -> None:
        step = int(self.step.numpy())
        self.manager.save(checkpoint_number=step)
        if not self.is_chief:
            tf.io.gfile.rmtree(self.manager.directory)
        if self.input_manager is not None:
            self.input_manager.save(checkpoint_number=step)

    # ------------------------------------------------------------------ evaluation, export
    def evaluate(self) -> dict:
        """Held-out metrics on eval_files: MLM loss, accuracy and perplexity (for "ltr",
        of the next token), NSP loss and accuracy; the same batches every time. Each
        sequence's loss terms are kept in `self.heldout_examples` (`write_heldout_losses`)."""
        config = self.config
        masking = None
        if self.heldout_masked_in_pipeline:
            tf.random.set_seed(config.seed)  # the same random masks at every evaluation
            masking = self._masking(config.max_predictions_per_seq)
        dataset = make_pretraining_dataset(
            config.eval_files, config.global_batch_size, config.max_seq_length,
            config.max_predictions_per_seq, is_training=False, batch_transform=masking)
        if config.eval_steps:
            dataset = dataset.take(config.eval_steps)
        batches = [self._eval_step(batch) for batch in dataset]
        if not batches:
            raise ValueError(f"--eval_files {config.eval_files!r} hold fewer than one batch "
                             f"({config.global_batch_size}) of records")
        self.heldout_examples = {key: np.concatenate([b[key].numpy() for b in batches])
                                 for key in SUM_KEYS}
        return mean_metrics({k: float(v.astype(np.float64).sum())
                             for k, v in self.heldout_examples.items()})

    def export(self, directory: str, step: int) -> None:
        """Encoder + MLM + NSP heads in our checkpoint format, for fine-tuning, with the
        longest sequence the model has seen after `step` steps."""
        save = functools.partial(save_checkpoint, root=self.model.heads(),
                                 vocab_file=self.vocab_file, lower_case=self.lower_case,
                                 heads=True,
                                 pretraining_seq_length=self._trained_seq_length(step))
        if "://" not in directory:
            save(directory)
            return
        with tempfile.TemporaryDirectory() as local:  # e.g. gs://: write locally, copy
            save(local)
            tf.io.gfile.makedirs(directory)
            for name in os.listdir(local):
                tf.io.gfile.copy(os.path.join(local, name), f"{directory}/{name}",
                                 overwrite=True)

    def _trained_seq_length(self, step: int) -> Optional[int]:
        """The longest sequence the model has seen after `step` steps, counting an
        --init_checkpoint's own pretraining; None where that is unknown (a checkpoint
        that does not record it, e.g. another format's)."""
        here = self.config.trained_seq_length(step)
        if self.init is None:
            return here
        before = self.init.pretraining_seq_length
        return None if before is None else max(here, before)

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.learning_rate)

    # ------------------------------------------------------------------ the loop
    def run_steps(self, num_steps: int, iterators=None) -> dict:
        """Runs `num_steps` optimizer steps in one compiled call, on batches from
        `iterators`, one per host (default: the current phase's input pipelines;
        `restore()` opens them). Returns their summed loss terms once the steps are done."""
        iterators = self.iterators if iterators is None else iterators
        sums = self._train_steps(iterators, tf.constant(num_steps))
        return {k: float(v) for k, v in sums.items()}  # waits for the steps to finish

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
        eval_metrics = None
        if step == 0 and self.init is not None and config.eval_files:
            # The curve starts where the init checkpoint stands (its fresh heads included).
            eval_metrics = self._evaluate_and_log(0, log, metrics_log, time.time())
        window, window_steps, window_seconds = None, 0, 0.0  # since the last log line
        # Elapsed seconds run on across resumptions (from the last row kept).
        train_metrics, start = {}, time.time() - metrics_log.elapsed_before
        # Several workers (MultiWorker) could only save together at a step they agree on:
        # there a signal keeps its usual effect, and the run resumes from its last
        # regular checkpoint.
        with StopSignals(enabled=not self.layout.multi_client) as stop:
            while step < config.num_train_steps:
                self._enter_phase(config.phase_of(step))
                num_steps = self._steps_in_next_call(step)
                call_start = time.time()
                sums = self.run_steps(num_steps)
                window_seconds += time.time() - call_start
                step += num_steps
                window = _add(window, sums)
                window_steps += num_steps

                if step % config.log_every == 0 or step == config.num_train_steps:
                    train_metrics = self._window_metrics(window, window_steps, window_seconds)
                    log(format_metrics(step, config.num_train_steps, train_metrics))
                    metrics_log.write(step, "train", train_metrics, time.time() - start)
                    window, window_steps, window_seconds = None, 0, 0.0
                    # (Masking that shows every target, e.g. 0/100/0, hides none: no check.)
                    if (self.is_chief and 0 < config.plateau_check_steps <= step
                            and not self.plateau and "mlm_hidden_loss" in train_metrics):
                        self._check_plateau(step, train_metrics["mlm_hidden_loss"], log)
                self._enter_phase(config.phase_of(step))
                evaluated = self._export_save_evaluate(step, log, metrics_log, start)
                eval_metrics = evaluated or eval_metrics
                if stop.signum and step < config.num_train_steps:
                    self._stop(step, stop, log, metrics_log)
        return self._finish(step, train_metrics, eval_metrics, metrics_log)

    def _stop(self, step: int, stop: StopSignals, log, metrics_log: MetricsLog) -> None:
        """Checkpoints `step` (unless that was just done) and raises TrainingStopped."""
        if step % self.config.save_checkpoints_steps:
            self.save()
        metrics_log.close()
        log(f"stopped by {stop.name} at step {step} of {self.config.num_train_steps}: "
            f"checkpoint saved in {self.checkpoint_dir}; the same command resumes from it")
        raise TrainingStopped(step, stop.exit_code)

    def _steps_in_next_call(self, step: int) -> int:
        """Optimizer steps until the next event (log line, checkpoint, evaluation, export,
        phase change or the end), at most steps_per_execution."""
        config = self.config
        events = [config.num_train_steps, config.phase1_steps,
                  _next_multiple(step, config.log_every),
                  _next_multiple(step, config.save_checkpoints_steps)]
        if config.eval_files:
            events.append(_next_multiple(step, self.eval_every))
        events += config.export_steps
        return min([step + config.steps_per_execution] + [e for e in events if e > step]) - step

    def _window_metrics(self, window: dict, window_steps: int, window_seconds: float) -> dict:
        """The training metrics of the steps since the last log line. Examples/s counts
        training calls only (the first includes tracing)."""
        metrics = mean_metrics(window)
        metrics.update(
            learning_rate=self.learning_rate,
            grad_norm=window["grad_norm"] / window_steps,
            examples_per_second=window_steps * self.config.global_batch_size / window_seconds)
        return metrics

    def _export_save_evaluate(self, step: int, log, metrics_log: MetricsLog,
                              start: float) -> dict | None:
        """What is due after `step`: the step export, the checkpoint, the evaluation.
        Returns the held-out metrics if it evaluated."""
        config = self.config
        done = step == config.num_train_steps
        # Export before checkpointing: a run killed in between redoes the steps up to
        # here, so no checkpoint lies beyond a step export that was not written.
        if step in config.export_steps and self.is_chief:
            self.export(config.step_export_dir(step), step)
            log(f"exported step {step} to {config.step_export_dir(step)}")
        if step % config.save_checkpoints_steps == 0 or done:
            self.save()
        if not config.eval_files or not (step % self.eval_every == 0 or done):
            return None
        return self._evaluate_and_log(step, log, metrics_log, start)

    def _evaluate_and_log(self, step: int, log, metrics_log: MetricsLog, start: float) -> dict:
        eval_metrics = self.evaluate()
        log(format_metrics(step, self.config.num_train_steps, eval_metrics, "eval"))
        metrics_log.write(step, "eval", eval_metrics, time.time() - start)
        return eval_metrics

    def _check_plateau(self, step: int, mlm_loss: float, log) -> None:
        """Compares the training masked-LM loss on the hidden targets with their unigram
        entropy; warns if it is not below (`bert_tf.plateau`)."""
        entropy = unigram_entropy(self._target_counts)
        stuck = mlm_loss >= entropy
        self.plateau = {"unigram_entropy": entropy, "plateau_check_step": step,
                        "plateau_warning": stuck}
        if stuck:
            log(plateau_message(step, mlm_loss, entropy))

    @functools.cached_property
    def _target_counts(self) -> np.ndarray:
        """Each id's count among the hidden targets of the first ~50k phase-1 records, as
        masked for training (`plateau.target_counts`); read once, for the output bias at
        step 0 and the plateau check."""
        config = self.config
        predictions = config.max_predictions_per_seq
        batches = make_pretraining_dataset(
            config.train_files, config.global_batch_size, config.max_seq_length,
            predictions, is_training=False, seed=config.seed,
            batch_transform=self._masking(predictions))
        batches = batches.take(max(1, _ENTROPY_RECORDS // config.global_batch_size))
        return target_counts(batches, config.objective, self.tokenizer.vocab_size)

    def _finish(self, step: int, train_metrics: dict, eval_metrics: dict | None,
                metrics_log: MetricsLog) -> dict:
        """Exports the final model and writes eval_results.json; returns its metrics."""
        config = self.config
        if config.eval_files and eval_metrics is None:  # resumed a finished run
            eval_metrics = self.evaluate()
        final = eval_metrics or train_metrics
        if self.is_chief:
            self.export(config.final_export_dir, step)
            write_json(os.path.join(config.model_dir, "eval_results.json"),
                       {"step": step, **final, **self.plateau}, sort_keys=True)
            if config.eval_files:
                write_heldout_losses(os.path.join(config.model_dir, HELDOUT_LOSSES),
                                     self.heldout_examples)
        metrics_log.close()
        return final


def write_heldout_losses(path: str, examples: dict) -> None:
    """HELDOUT_LOSSES: one row per held-out sequence, in the order of eval_files: its
    summed masked-LM loss (nats) over its mlm_count predictions, how many of them were
    right, and its NSP loss and correctness (0 without NSP). Models evaluated on the same
    records have the same rows, so a difference of perplexities gets a paired bootstrap
    over sequences (`reproduce.statistics`)."""
    columns = ("mlm_loss", "mlm_count", "mlm_correct", "nsp_loss", "nsp_correct")
    lines = ["\t".join(("index",) + columns)]
    for i in range(len(examples["mlm_count"])):
        lines.append("\t".join([str(i)] + [f"{float(examples[c][i]):.9g}" for c in columns]))
    write_text(path, "\n".join(lines) + "\n")


def _model_config(config: PretrainConfig, vocab_size: int,
                  init: Checkpoint | None) -> BertConfig:
    """The init checkpoint's config, else the model size's; with --dropout's rates."""
    overrides = {} if config.dropout is None else {
        "hidden_dropout_prob": config.dropout, "attention_probs_dropout_prob": config.dropout}
    if init is not None:
        return init.config.replace(**overrides)
    return config_for_size(config.model_size, vocab_size=vocab_size, **overrides)


def _add(totals: dict | None, sums: dict) -> dict:
    """Running sums of loss terms (None: nothing yet)."""
    return sums if totals is None else {k: totals[k] + sums[k] for k in totals}


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
