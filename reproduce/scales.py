"""The three scales of the plan: what differs between `paper`, `cpu` and `smoke`.

A `Scale` is data: the pretraining corpus and budget, the models of each table and the
fine-tuning settings of each task. `reproduce.experiments` turns a scale into runs.

  paper  the paper's settings: BERT-Base/Large, 1M steps at batch 256 (90% at 128 tokens,
         10% at 512), the fine-tuning grids and restarts. For TPUs / GPU clusters.
  cpu    designed for one 2-core machine in about 3.5 hours (results/README.md, "The cpu
         scale's design").
  smoke  the whole pipeline, every stage and every table builder, in minutes.
"""

import dataclasses
from typing import Optional

from glue_suite.tasks import TASKS
from reproduce import paper_numbers as paper

VOCABS = {"uncased": "bert_vocab/bert-base-uncased/vocab.txt",
          "cased": "bert_vocab/bert-base-cased/vocab.txt"}


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


_PAPER_FT = {task: Finetune() for task in TASKS}

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
    # Where SQuAD v2.0 train is missing (this machine's data), train on v1.1 rather than
    # leave Table 3 empty; labelled as such. With v2.0 train present nothing changes.
    squad2_from_squad1=True,
)

# ---------------------------------------------------------------------------- cpu scale
# One 2-core machine, ~3.5 hours estimated (`python -m reproduce.all --scale cpu --dry_run`
# prints the breakdown). Why each setting is what it is (model sizes, the pretraining
# budget, learning rates, training-set caps, the BiLSTM width), with the measurements
# behind it: results/README.md, "The cpu scale's design".
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
    main={t: dataclasses.replace(_SMOKE_FT, seeds=2 if t == "mrpc" else 1) for t in TASKS},
    ablation={t: dataclasses.replace(_SMOKE_FT, seeds=2 if t == "mrpc" else 1)
              for t in TASKS},
    features=dataclasses.replace(_SMOKE_FT, learning_rates=(1e-3,)),
    bilstm_units="size",
    squad2_from_squad1=True,
    feature_rows=("concat last four hidden", "weighted sum all 12 layers"),
)

SCALES = {"paper": PAPER, "cpu": CPU, "smoke": SMOKE}
