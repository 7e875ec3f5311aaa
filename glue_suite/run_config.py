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
from glue_suite import finetune, scoring
from glue_suite.batching import XLA_LENGTH_MULTIPLE
from glue_suite.data_dir import resolve_source
from glue_suite.export import check_exportable
from glue_suite.tasks import TOKEN, TaskSpec, default_learning_rates, get_task


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Every resolved setting of a run (written to metrics.json as "config").

    Args:
        task: the task evaluated.
        train_task: the task whose train split trains the model (`task` unless
            --train_task; same kind and labels).
        data_dir, source, tfds_data_dir: where the splits are read (files or tfds;
            `data_dir.resolve_source` picks tfds when there is no data directory).
        output_dir: metrics.json, predictions, run.log.
        overwrite: reuse an output_dir holding a finished run, whose outputs move to
            previous-<time>/ there (`glue_suite.outputs`); else such a directory is refused.
        export_dir: where the best model goes as a SavedModel taking raw strings
            (`glue_suite.export`); None: not exported.
        cache_dir: featurized splits, and feature-based runs' encoder layers (None: no
            cache).
        init_checkpoint: checkpoint directory (None: the shipped default).
        max_train_examples, max_eval_examples: subset sizes (None: every example).
        skip_bad_rows: skip and count malformed rows instead of stopping.
        predict_test: write the leaderboard files of the test splits.
        learning_rates, seeds: the grid; every learning rate runs once per seed.
            learning_rates is None until the checkpoint is read, when `with_default_grid`
            fills it for the checkpoint's size (unless --learning_rates gave it).
        learning_rate_grid: where the grid came from (recorded in metrics.json).
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
    overwrite: bool
    export_dir: Optional[str]
    cache_dir: Optional[str]
    init_checkpoint: Optional[str]
    max_train_examples: Optional[int]
    max_eval_examples: Optional[int]
    skip_bad_rows: bool
    predict_test: bool
    learning_rates: Optional[tuple]
    learning_rate_grid: Optional[str]
    seeds: tuple
    train: finetune.TrainSettings
    features: feats.FeatureSettings
    squad: scoring.SquadOptions
    strategy: str
    tpu: Optional[str]
    precision: str

    def grid_point(self, learning_rate: float, seed: int) -> finetune.TrainSettings:
        return dataclasses.replace(self.train, learning_rate=learning_rate, seed=seed)


def with_default_grid(config: "RunConfig", hidden_size: int) -> "RunConfig":
    """`config` with the learning-rate grid for a checkpoint of `hidden_size` where
    --learning_rates left it unset (`tasks.default_learning_rates`)."""
    if config.learning_rates is not None:
        return config
    rates, why = default_learning_rates(get_task(config.task), hidden_size)
    return dataclasses.replace(config, learning_rates=rates, learning_rate_grid=why)


def _check_flags(args: argparse.Namespace, spec: TaskSpec, train_spec: TaskSpec) -> None:
    """Raises ValueError for flag combinations the run cannot honour."""
    if (train_spec.kind, train_spec.labels) != (spec.kind, spec.labels):
        raise ValueError(f"--train_task {train_spec.name} cannot train --task {spec.name}: "
                         f"kinds {train_spec.kind}/{spec.kind}, labels "
                         f"{list(train_spec.labels)}/{list(spec.labels)} must match")
    if args.feature_mode and spec.kind != TOKEN:
        raise ValueError(f"--feature_mode needs a token task (conll2003), not {spec.name} "
                         f"({spec.kind}); the paper's feature-based runs are NER only")
    if args.length_multiple is not None and args.length_multiple < 0:
        raise ValueError(f"--length_multiple must be 0 (no trimming) or positive, got "
                         f"{args.length_multiple}")
    if args.feature_mode and args.head != "dense":
        raise ValueError("--feature_mode always tags with a BiLSTM; do not pass --head")
    if args.export_dir:
        check_exportable(spec)


def _length_multiple(args: argparse.Namespace) -> int:
    """--length_multiple, or its default for the strategy and compiler."""
    if args.strategy == "tpu":
        return 0  # TPUs need static shapes: batches padded to max_seq_length
    if args.length_multiple is not None:
        return args.length_multiple
    # Without XLA one trace serves every length, so each batch is cut to its longest row;
    # XLA compiles every new length, so fewer lengths pay there (glue_suite.batching).
    return XLA_LENGTH_MULTIPLE if args.jit_compile else finetune.TrainSettings.length_multiple


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
        verbose=args.verbose, run_eagerly=args.run_eagerly,
        jit_compile=args.jit_compile, head=args.head,
        feature_mode=args.feature_mode, bilstm_units=args.bilstm_units,
        length_multiple=_length_multiple(args))
    features = feats.FeatureSettings.for_task(hp, args.max_seq_length, args.doc_stride,
                                              args.max_query_length)
    # Without a data directory, the tfds fallback needs both tasks in tfds.
    data_dir, source = resolve_source(args.data_dir, args.source,
                                      train_spec.tfds_name and spec.tfds_name)
    return RunConfig(
        task=spec.name, train_task=train_spec.name, data_dir=data_dir,
        source=source, tfds_data_dir=args.tfds_data_dir, output_dir=output_dir,
        overwrite=args.overwrite, export_dir=args.export_dir,
        cache_dir=args.cache_dir or os.path.join(output_dir, "cache"),
        init_checkpoint=args.init_checkpoint, max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples, skip_bad_rows=args.skip_bad_rows,
        predict_test=not args.no_test_predictions,
        learning_rates=tuple(args.learning_rates) if args.learning_rates else None,
        learning_rate_grid="--learning_rates" if args.learning_rates else None,
        seeds=tuple(range(args.first_seed, args.first_seed + args.seeds)), train=train,
        features=features,
        squad=scoring.SquadOptions(args.n_best_size, args.max_answer_length,
                                   args.null_score_diff_threshold),
        strategy=args.strategy, tpu=args.tpu, precision=args.precision)
