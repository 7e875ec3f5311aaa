"""Pretraining BERT on tf.distribute: the paper's objectives, two phases, exact resumption.

    python -m bert_tf.pretrain --config base --objective nsp --vocab_file vocab.txt \\
        --train_files 'pretrain_128/part-*' --model_dir runs/base \\
        --strategy tpu --tpu my-tpu --global_batch_size 256 --num_train_steps 1000000 \\
        --phase2_train_files 'pretrain_512/part-*' --phase2_seq_length 512 \\
        --phase2_fraction 0.1 --learning_rate 1e-4 --num_warmup_steps 10000 \\
        --precision mixed_bfloat16 --eval_files 'heldout_128/part-*'

Continued pretraining: --init_checkpoint DIR (any format `checkpoints.read_checkpoint`
reads) in place of --config starts from that model, heads included where it has them;
the records must use its vocabulary (`init_checkpoint`).

The paper's recipe (Appendix A.2): Adam(W) with lr 1e-4, beta1 0.9, beta2 0.999,
epsilon 1e-6, weight decay 0.01 (not on LayerNorm or biases), 10k warmup steps then
linear decay, gradients clipped to global norm 1.0; 90% of the steps at sequence length
128, the last 10% at 512 (phase 2, its own records; the learning-rate schedule runs on
across both phases).

How a step works, and how a killed run resumes exactly: `trainer`. The run's settings:
`pretrain_config.PretrainConfig`, one field per flag below.

Written to --model_dir (only by the chief worker):
  pretrain_config.json   the resolved configuration, the command, the git state and the
                         hardware (bert_tf.provenance; of the latest start where a run
                         resumed), and the init checkpoint's name or relative path and
                         content hashes
  metrics.csv            one row per log interval ("train") and per evaluation ("eval");
                         elapsed_seconds runs on across resumptions
  tensorboard/{train,eval}/   the same as TensorBoard scalars
  eval_results.json      the final held-out metrics (masked-LM perplexity = Table 6's) and
                         the plateau check (--plateau_check_steps, `plateau`): the
                         records' unigram entropy and whether the run was still above it
  heldout_losses.tsv     the final evaluation per held-out sequence: summed masked-LM loss,
                         predictions, correct ones (intervals over sequences)
and to --export_dir (default model_dir/export): the encoder and heads in our checkpoint
format (config.json, weights.safetensors, vocab.txt), glue_suite's `--init_checkpoint`;
with --export_steps S1,S2,... the same export of the model after step S, beside it as
export_<S>/ (Figure 5's fine-tuning accuracy against pretraining steps);
to --checkpoint_dir (default model_dir/checkpoints): tf.train checkpoints, the last K.
"""

import argparse
import dataclasses
import os
import sys
from typing import Optional

import tensorflow as tf

from bert_tf import distribute, portable_paths, provenance
from bert_tf.cli import EXIT_INPUT_ERROR, check_output_dir, run_main
from bert_tf.config import SIZES
from bert_tf.files import write_json
from bert_tf.init_checkpoint import describe
from bert_tf.optimization import OPTIMIZERS
from bert_tf.pretrain_config import OUTPUT_BIAS_INITS, PRECISIONS, PretrainConfig
from bert_tf.pretraining_dataset import check_records
from bert_tf.pretraining_instances import OBJECTIVES
from bert_tf.trainer import Trainer, TrainingStopped, heldout_masked_in_pipeline


def check_inputs(config: PretrainConfig) -> None:
    """InputError before anything is built or written: an output directory that cannot
    be written, or records that are incomplete or made for other settings than the
    phase (or evaluation) that reads them (`pretraining_dataset.check_records`).

    Without --vocab_file (--init_checkpoint), `init_checkpoint.check_vocabulary`
    compares the records' vocabulary with the checkpoint's instead.
    """
    for flag, path in (("--model_dir", config.model_dir),
                       ("--checkpoint_dir", config.checkpoint_dir),
                       ("--export_dir", config.export_dir)):
        if path:
            check_output_dir(path, flag)
    record_sets = [("--train_files", *config.phase_data(1), config.dynamic_masking)]
    if config.phase2_train_files:
        record_sets.append(("--phase2_train_files", *config.phase_data(2),
                            config.dynamic_masking))
    if config.eval_files:  # phase-1-shaped records; masked or not (Trainer.evaluate)
        record_sets.append(("--eval_files", config.eval_files, *config.phase_data(1)[1:],
                            heldout_masked_in_pipeline(config)))
    for flag, files, seq_length, predictions, unmasked in record_sets:
        check_records(files, flag, seq_length, predictions, config.vocab_file, unmasked)


def config_record(config: PretrainConfig, command: Optional[str], num_replicas: int,
                  bert_config: dict, init_source: Optional[dict]) -> dict:
    """The content of pretrain_config.json. Nothing reads it back (a resumed run trusts
    its checkpoint), so each start rewrites it: git and hardware are the latest start's.

    Args:
        bert_config: the model's `BertConfig.to_dict()`.
        init_source: `init_checkpoint.describe` of --init_checkpoint; None without one.
    """
    init = {} if init_source is None else {"init_checkpoint_source": init_source}
    return {**dataclasses.asdict(config), "command": command, "num_replicas": num_replicas,
            "bert_config": bert_config, "git": provenance.git_commit(),
            "hardware": provenance.describe(), **init}


def pretrain(config: PretrainConfig, strategy: Optional[tf.distribute.Strategy] = None,
             command: Optional[str] = None, log=print, data_dir: Optional[str] = None) -> dict:
    """Runs (or resumes) a pretraining run; returns the final metrics.

    Args:
        config: the run.
        strategy: default: the current (default) strategy, i.e. one device.
        command: the command line, recorded in pretrain_config.json.
        data_dir: the data directory, which pretrain_config.json's paths name
            $BERT_DATA_DIR (bert_tf.portable_paths; its other paths are relative to
            --model_dir or to the working directory).
    """
    check_inputs(config)
    strategy = strategy or tf.distribute.get_strategy()
    trainer = Trainer(config, strategy)
    if trainer.is_chief:
        tf.io.gfile.makedirs(config.model_dir)
        init = None if trainer.init is None else describe(trainer.init)
        record = config_record(config, command, strategy.num_replicas_in_sync,
                               trainer.model.config.to_dict(), init)
        write_json(os.path.join(config.model_dir, "pretrain_config.json"),
                   portable_paths.portable_record(record, data_dir, config.model_dir),
                   sort_keys=True)
    return trainer.train(log=log)


# ---------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    """The command line's flags: --config (the model size), --strategy and --tpu, and
    one flag per other `PretrainConfig` field, with its default."""
    defaults = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}
    p = argparse.ArgumentParser(prog="python -m bert_tf.pretrain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", choices=list(SIZES),
                   help="model size (required unless --init_checkpoint)")
    p.add_argument("--init_checkpoint",
                   help="continue pretraining this checkpoint (ours, Hugging Face, Google "
                        "TF1, keras-hub); its config sets the model")
    p.add_argument("--objective", choices=OBJECTIVES, default="nsp")
    p.add_argument("--train_files", required=True, help="comma-separated TFRecord globs")
    p.add_argument("--vocab_file",
                   help="the records' vocabulary (default with --init_checkpoint: its own)")
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
                 "log_every", "seed", "plateau_check_steps"):
        p.add_argument(f"--{name}", type=int, default=defaults[name])
    p.add_argument("--ltr_predictions", type=int, default=defaults["ltr_predictions"],
                   help="with --objective ltr: next-token predictions scored per training "
                        "sequence, at positions drawn anew each read (default 0: every "
                        "position, as the paper)")
    for name in ("phase2_fraction", "learning_rate", "weight_decay", "clip_norm",
                 "adam_beta2", "masked_lm_prob"):
        p.add_argument(f"--{name}", type=float, default=defaults[name])
    p.add_argument("--dropout", type=float, default=None,
                   help="both dropout rates (default: the model size's, 0.1)")
    p.add_argument("--phase2_train_files", help="phase-2 (long sequence) TFRecord globs")
    p.add_argument("--eval_files", help="held-out TFRecord globs (phase-1 shape)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--precision", choices=PRECISIONS, default="float32")
    p.add_argument("--output_bias_init", choices=OUTPUT_BIAS_INITS,
                   default=defaults["output_bias_init"],
                   help="the LM head's output bias at step 0: zeros (BERT) or unigram (the "
                        "log frequencies of the training targets)")
    p.add_argument("--jit_compile", action="store_true")
    p.add_argument("--dynamic_masking", action="store_true",
                   help="mask each training batch anew (records written with "
                        "--dynamic_masking); masked --eval_files keep their masks")
    p.add_argument("--mask_rates", default="0.8,0.1,0.1",
                   help="with --dynamic_masking: [MASK], same, random fractions")
    return p


def main(argv=None) -> Optional[int]:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        values = {k: v for k, v in vars(args).items() if k not in ("config", "strategy", "tpu")}
        values["mask_rates"] = tuple(float(r) for r in args.mask_rates.split(","))
        values["export_steps"] = tuple(sorted({int(s) for s in args.export_steps.split(",")
                                               if s.strip()}))
        config = PretrainConfig(model_size=args.config, **values)
        strategy = distribute.create_strategy(args.strategy, args.tpu)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    data_dir = os.environ.get(portable_paths.DATA_DIR_VAR)
    try:
        pretrain(config, strategy,
                 command=portable_paths.command_line("bert_tf.pretrain", argv, data_dir),
                 log=lambda line: print(line, flush=True), data_dir=data_dir)
    except TrainingStopped as stopped:  # SIGTERM / Ctrl-C, after a checkpoint
        return stopped.exit_code


if __name__ == "__main__":
    run_main(main)
