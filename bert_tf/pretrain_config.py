"""The configuration of a pretraining run: one frozen dataclass, checked when made.

`python -m bert_tf.pretrain` builds it from its flags (`pretrain.build_parser` takes the
defaults from here) and writes it to model_dir/pretrain_config.json; `trainer.Trainer`
runs it.
"""

import dataclasses
import os
from typing import Optional

from bert_tf.checkpoint_steps import default_checkpoint_dir
from bert_tf.config import SIZES
from bert_tf.optimization import OPTIMIZERS
from bert_tf.pretraining_instances import OBJECTIVES

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
OUTPUT_BIAS_INITS = ("zeros", "unigram")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Everything a pretraining run depends on (written to model_dir/pretrain_config.json).

    Args:
        model_size: a row of `config.SIZES` ("tiny" ... "large", Table 6 sizes); None
            with init_checkpoint, whose config sets the model.
        objective: "nsp", "no_nsp" or "ltr" (see `pretraining_model`).
        train_files: comma-separated globs of phase-1 TFRecords.
        vocab_file: the WordPiece vocabulary the records were made with; sets vocab_size
            and is exported with the model. None with init_checkpoint: its vocabulary.
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
        adam_beta2: the decay of Adam's (and LAMB's) second-moment estimate: the paper's
            0.999, or RoBERTa's 0.98, which it found steadier at high rates.
        output_bias_init: the LM head's output bias at step 0: "zeros" (BERT's) or
            "unigram", the log frequencies of the training targets (`plateau`); a head
            loaded from init_checkpoint keeps its own.
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
        dynamic_masking, masked_lm_prob, mask_rates: mask each training batch anew in the
            input pipeline (`dynamic_masking.DynamicMasking`) with these rates; held-out
            records written with masks are scored on them (`trainer.evaluate`).
        init_checkpoint: start from this checkpoint's weights (`init_checkpoint`); a
            resumed run restores its own checkpoint instead.
        plateau_check_steps: at the first log line after this many steps, warn if the
            training masked-LM loss is still above the unigram entropy of the records
            (`plateau`); 0: never.
        ltr_predictions: "ltr" only: score this many next-token predictions per training
            sequence, at positions drawn anew each time it is read
            (`pretraining_model.sample_next_token_positions`), like masked LM's P: the
            LM head's cost grows with the predictions scored, so "ltr" at P = T - 1 costs
            several times "nsp" at P = 20 on a small model. 0: every position (the
            paper's LTR). Held-out evaluation scores every position either way.
    """

    model_size: Optional[str]
    objective: str
    train_files: str
    vocab_file: Optional[str]
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
    adam_beta2: float = 0.999
    output_bias_init: str = "zeros"
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
    init_checkpoint: Optional[str] = None
    plateau_check_steps: int = 2000
    ltr_predictions: int = 0

    def __post_init__(self):
        # (holds, what must hold, the fields it is about: the error shows their values)
        checks = [
            (self.model_size in SIZES if not self.init_checkpoint else self.model_size is None,
             f"model_size must be one of {', '.join(SIZES)}, or None with init_checkpoint "
             f"(whose config sets the model)", ("model_size", "init_checkpoint")),
            (bool(self.vocab_file or self.init_checkpoint),
             "vocab_file is needed without init_checkpoint", ("vocab_file", "init_checkpoint")),
            (self.objective in OBJECTIVES, f"objective must be one of {OBJECTIVES}",
             ("objective",)),
            (self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}",
             ("optimizer",)),
            (self.output_bias_init in OUTPUT_BIAS_INITS,
             f"output_bias_init must be one of {OUTPUT_BIAS_INITS}", ("output_bias_init",)),
            (0 < self.adam_beta2 < 1, "adam_beta2 must lie in (0, 1)", ("adam_beta2",)),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}",
             ("precision",)),
            (self.num_train_steps > 0, "num_train_steps must be positive", ("num_train_steps",)),
            (0 <= self.num_warmup_steps <= self.num_train_steps,
             "num_warmup_steps must lie in [0, num_train_steps]",
             ("num_warmup_steps", "num_train_steps")),
            (0 < self.phase2_fraction < 1, "phase2_fraction must lie in (0, 1)",
             ("phase2_fraction",)),
            (min(self.global_batch_size, self.steps_per_execution, self.grad_accum_steps,
                 self.save_checkpoints_steps, self.keep_checkpoints, self.log_every) > 0,
             "batch size, steps_per_execution, grad_accum_steps, save_checkpoints_steps, "
             "keep_checkpoints and log_every must be positive",
             ("global_batch_size", "steps_per_execution", "grad_accum_steps",
              "save_checkpoints_steps", "keep_checkpoints", "log_every")),
            (self.plateau_check_steps >= 0, "plateau_check_steps must not be negative",
             ("plateau_check_steps",)),
            (0 <= self.ltr_predictions < self.max_seq_length and
             (self.objective == "ltr" or not self.ltr_predictions),
             "ltr_predictions must lie in [0, max_seq_length), and be 0 unless objective "
             "is ltr", ("ltr_predictions", "max_seq_length", "objective")),
            (self.global_batch_size % self.grad_accum_steps == 0,
             "global_batch_size must be divisible by grad_accum_steps",
             ("global_batch_size", "grad_accum_steps")),
            (all(0 < s <= self.num_train_steps for s in self.export_steps),
             "export_steps must lie in [1, num_train_steps]",
             ("export_steps", "num_train_steps")),
        ]
        for ok, message, fields in checks:
            if not ok:
                got = ", ".join(f"{name}={getattr(self, name)!r}" for name in fields)
                raise ValueError(f"{message}; got {got}")

    @property
    def checkpoints(self) -> str:
        return self.checkpoint_dir or default_checkpoint_dir(self.model_dir)

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

    def trained_seq_length(self, step: int) -> int:
        """The longest sequence the model has been shown after `step` steps: the
        position embeddings beyond it are still as initialized."""
        return self.phase2_seq_length if self.phase_of(step - 1) == 2 else self.max_seq_length

    def phase_data(self, phase: int) -> tuple:
        """(files, max_seq_length, max_predictions_per_seq) of a phase."""
        if phase == 1:
            return self.train_files, self.max_seq_length, self.max_predictions_per_seq
        return (self.phase2_train_files, self.phase2_seq_length,
                self.phase2_max_predictions_per_seq)

