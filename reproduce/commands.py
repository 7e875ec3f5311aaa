"""The command lines of the three project CLIs, as typed settings.

Each stage's settings are a frozen dataclass whose field names are the CLI's flags, in
the order they appear on the command line; `argv()` is the only place that turns
settings into flags (`to_argv`). The planner (`reproduce.plan`) fills these from a
scale; the runner executes `python -m <MODULE> <argv>`; every argv parses with the
CLI's own argparse parser (tests/test_reproduce_commands.py).

Run records compare their argv with the plan's to decide whether a run is finished,
so a change here (a field's order, a number's format) makes finished runs rerun.
"""

import dataclasses
from typing import ClassVar, Optional

# bert_tf.distribute.STRATEGIES, repeated because that module imports TensorFlow and the
# harness does not; tests/test_reproduce_commands.py checks that the two agree.
STRATEGIES = ("cpu", "gpu", "mirrored", "multiworker", "tpu")
# glue_suite.run's --bilstm_units default: the paper's 768 (BERT-Base's hidden size).
BILSTM_UNITS_DEFAULT = 768


def to_argv(settings) -> tuple:
    """`--field value` for each field in order: None, False and () leave the flag out,
    True writes it bare, tuples are comma-joined, nested settings are spliced in."""
    argv = []
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if dataclasses.is_dataclass(value):
            argv += to_argv(value)
        elif value is None or value is False or value == ():
            continue
        elif value is True:
            argv.append(f"--{field.name}")
        elif isinstance(value, tuple):
            argv += [f"--{field.name}", ",".join(str(v) for v in value)]
        else:
            argv += [f"--{field.name}", str(value)]
    return tuple(argv)


@dataclasses.dataclass(frozen=True)
class Distribution:
    """tf.distribute settings, shared by bert_tf.pretrain and glue_suite.run."""
    strategy: str
    tpu: Optional[str] = None  # with strategy "tpu": its name or grpc:// address
    precision: str = "float32"


def distribution(strategy: str, tpu: Optional[str], module: str) -> Distribution:
    """The precision each CLI runs at under `strategy`."""
    # float32 on CPU: the measured throughput is float32, and bfloat16 is slow on CPUs
    # without AMX. glue_suite.run offers float32 and mixed_bfloat16 only.
    if strategy == "tpu":
        precision = "mixed_bfloat16"
    elif strategy in ("gpu", "mirrored", "multiworker") and module == PretrainCommand.MODULE:
        precision = "mixed_float16"
    else:
        precision = "float32"
    return Distribution(strategy, tpu if strategy == "tpu" else None, precision)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataCommand:
    """python -m bert_tf.create_pretraining_data: a corpus -> shards + metadata.json."""
    MODULE: ClassVar[str] = "bert_tf.create_pretraining_data"
    input_files: tuple
    vocab_file: str
    output_dir: str
    max_seq_length: int
    max_predictions_per_seq: int
    masked_lm_prob: float
    dupe_factor: int
    short_seq_prob: float
    random_seed: int
    mask_rates: tuple  # (MASK, SAME, RND)
    objective: str
    num_workers: int
    dynamic_masking: bool = False  # unmasked records: the pretraining run masks them
    overwrite: bool = True  # a rerun after a kill replaces partial shards
    # Input caps of a rehearsal (reproduce.rehearsal); None in a real plan.
    max_files_per_pattern: Optional[int] = None
    max_bytes_per_file: Optional[int] = None

    def argv(self) -> tuple:
        return to_argv(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainCommand:
    """python -m bert_tf.pretrain: shards -> checkpoints, metrics.csv, eval_results.json,
    export/ (and export_<step>/ for each of `export_steps`)."""
    MODULE: ClassVar[str] = "bert_tf.pretrain"
    config: str  # a bert_tf.config.SIZES name
    objective: str
    train_files: str
    vocab_file: str
    model_dir: str
    distribution: Distribution
    global_batch_size: int
    num_train_steps: int
    learning_rate: float
    num_warmup_steps: int
    max_seq_length: int
    max_predictions_per_seq: int
    save_checkpoints_steps: int
    eval_files: str
    eval_every: int
    eval_steps: int
    log_every: int
    phase2_train_files: Optional[str] = None
    phase2_seq_length: Optional[int] = None
    phase2_max_predictions_per_seq: Optional[int] = None
    phase2_fraction: Optional[float] = None
    export_steps: tuple = ()
    ltr_predictions: Optional[int] = None  # None: the CLI's 0, every position
    # Optimizer steps per call of the compiled loop: a TPU otherwise waits on the host
    # for every step. None (the CLI's 1) elsewhere.
    steps_per_execution: Optional[int] = None
    # Both dropout rates; None: the size's (0.1). Last, so that the commands of runs
    # without it are what they were.
    dropout: Optional[float] = None
    # Fresh masks every batch, at these rates (records written with --dynamic_masking);
    # after dropout for the same reason.
    dynamic_masking: bool = False
    mask_rates: Optional[tuple] = None

    def argv(self) -> tuple:
        return to_argv(self)


# Steps per host round trip on a TPU; the trainer still stops at every log, checkpoint,
# evaluation and export step.
TPU_STEPS_PER_EXECUTION = 100


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneCommand:
    """python -m glue_suite.run: a checkpoint + a task -> metrics.json, predictions.
    None leaves a setting to the CLI (the task's paper default)."""
    MODULE: ClassVar[str] = "glue_suite.run"
    task: str
    train_task: Optional[str] = None
    init_checkpoint: Optional[str] = None  # None: the default shipped checkpoint
    data_dir: str
    # "tfds" where there is no data directory (`reproduce.plan.Planner`); None: the CLI's
    # default, the files under data_dir. Said on the command line: the CLI's own fallback
    # never applies to a given --data_dir, and the command shows where the data came from.
    source: Optional[str] = None
    output_dir: str
    cache_dir: str
    distribution: Distribution
    seeds: int
    verbose: int = 2  # one log line per epoch instead of a progress bar
    epochs: Optional[int] = None
    batch_size: Optional[int] = None
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    learning_rates: Optional[tuple] = None
    bilstm_units: Optional[int] = None
    head: Optional[str] = None
    feature_mode: Optional[str] = None
    no_test_predictions: bool = False  # a rehearsal's (reproduce.rehearsal)
    # Never planned (the planned argv decides whether a run is done): the runner sets it
    # for a rerun into a directory that holds a finished run (`runner.executed_argv`).
    overwrite: bool = False

    def argv(self) -> tuple:
        return to_argv(self)


COMMANDS = {c.MODULE: c for c in (DataCommand, PretrainCommand, FinetuneCommand)}
