"""The resolved settings of a fine-tuning run: `RunConfig`, and `resolve_config`, which
fills the flags left unset with the task's defaults (glue_suite.tasks.TASKS[task].hparams).

The command line itself is `glue_suite.run.build_parser`; metrics.json stores the config as
`dataclasses.asdict(config)`, its train, features and squad groups nested.
"""

import argparse
import dataclasses
import os
from typing import Optional

from glue_suite import features as feats
from glue_suite import finetune
from glue_suite.data_dir import resolve_data_dir
from glue_suite.tasks import TOKEN, TaskSpec, get_task


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Every resolved setting of a run (written to metrics.json as "config").

    Args:
        task: the task evaluated.
        train_task: the task whose train split trains the model (`task` unless
            --train_task; same kind and labels).
        data_dir, source, tfds_data_dir: where the splits are read (files or tfds).
        output_dir: metrics.json, predictions, run.log.
        cache_dir: featurized splits (None: no cache).
        init_checkpoint: checkpoint directory (None: the shipped default).
        max_train_examples, max_eval_examples: subset sizes (None: every example).
        skip_bad_rows: skip and count malformed rows instead of stopping.
        predict_test: write the leaderboard files of the test splits.
        learning_rates, seeds: the grid; every learning rate runs once per seed.
        train: the settings every grid point shares; its learning_rate and seed are None,
            since the grid sets them (`grid_point`).
        features: max_seq_length, and SQuAD's doc_stride and max_query_length.
        squad: SQuAD post-processing.
        strategy, tpu, precision: where the model runs, and its dtype policy.
    """
    task: str
    train_task: str
    data_dir: str
    source: str
    tfds_data_dir: Optional[str]
    output_dir: str
    cache_dir: Optional[str]
    init_checkpoint: Optional[str]
    max_train_examples: Optional[int]
    max_eval_examples: Optional[int]
    skip_bad_rows: bool
    predict_test: bool
    learning_rates: tuple
    seeds: tuple
    train: finetune.TrainSettings
    features: feats.FeatureSettings
    squad: finetune.SquadOptions
    strategy: str
    tpu: Optional[str]
    precision: str

    def grid_point(self, learning_rate: float, seed: int) -> finetune.TrainSettings:
        return dataclasses.replace(self.train, learning_rate=learning_rate, seed=seed)


def _check_flags(args: argparse.Namespace, spec: TaskSpec, train_spec: TaskSpec) -> None:
    """Raises ValueError for flag combinations the run cannot honour."""
    if (train_spec.kind, train_spec.labels) != (spec.kind, spec.labels):
        raise ValueError(f"--train_task {train_spec.name} cannot train --task {spec.name}: "
                         f"kinds {train_spec.kind}/{spec.kind}, labels "
                         f"{list(train_spec.labels)}/{list(spec.labels)} must match")
    if args.feature_mode and spec.kind != TOKEN:
        raise ValueError(f"--feature_mode needs a token task (conll2003), not {spec.name} "
                         f"({spec.kind}); the paper's feature-based runs are NER only")
    if args.feature_mode and args.head != "dense":
        raise ValueError("--feature_mode always tags with a BiLSTM; do not pass --head")


def resolve_config(args: argparse.Namespace) -> RunConfig:
    """Fills unset flags with the task's defaults (TASKS[task].hparams)."""
    spec = get_task(args.task)
    train_spec = get_task(args.train_task or args.task)
    _check_flags(args, spec, train_spec)
    hp = spec.hparams
    output_dir = args.output_dir or os.path.join("runs", spec.name)
    train = finetune.TrainSettings(
        learning_rate=None, seed=None, epochs=args.epochs or hp.epochs,
        batch_size=args.batch_size or hp.batch_size, eval_batch_size=args.eval_batch_size,
        warmup_proportion=args.warmup_proportion, weight_decay=args.weight_decay,
        clipnorm=args.clipnorm or None, dropout=args.dropout, optimizer=args.optimizer,
        verbose=args.verbose, run_eagerly=args.run_eagerly, head=args.head,
        feature_mode=args.feature_mode, bilstm_units=args.bilstm_units)
    features = feats.FeatureSettings(
        max_seq_length=args.max_seq_length or hp.max_seq_length,
        doc_stride=args.doc_stride or hp.doc_stride or feats.FeatureSettings.doc_stride,
        max_query_length=(args.max_query_length or hp.max_query_length
                          or feats.FeatureSettings.max_query_length))
    return RunConfig(
        task=spec.name, train_task=train_spec.name, data_dir=resolve_data_dir(args.data_dir),
        source=args.source, tfds_data_dir=args.tfds_data_dir, output_dir=output_dir,
        cache_dir=args.cache_dir or os.path.join(output_dir, "cache"),
        init_checkpoint=args.init_checkpoint, max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples, skip_bad_rows=args.skip_bad_rows,
        predict_test=not args.no_test_predictions,
        learning_rates=tuple(args.learning_rates or hp.learning_rates),
        seeds=tuple(range(args.seeds)), train=train, features=features,
        squad=finetune.SquadOptions(args.n_best_size, args.max_answer_length,
                                    args.null_score_diff_threshold),
        strategy=args.strategy, tpu=args.tpu, precision=args.precision)
