"""The fine-tuning tasks of the BERT paper (Devlin et al. 2018), plus CoNLL-2003 NER.

`TASKS` is the registry: one plain dict, task name -> `TaskSpec`. Hyperparameters are the
paper's (Section 4 and Appendix A.3); where the paper gives none the choice is marked.

Metric values everywhere in `glue_suite` are percentages, as in the paper's tables and
the official SQuAD scripts (MRPC accuracy 84.6, CoLA MCC 52.1, SQuAD F1 88.5).
"""

import dataclasses
from typing import NamedTuple, Optional

CLASSIFICATION = "classification"
REGRESSION = "regression"
SPAN = "span"
MULTIPLE_CHOICE = "multiple_choice"
TOKEN = "token"
KINDS = (CLASSIFICATION, REGRESSION, SPAN, MULTIPLE_CHOICE, TOKEN)


@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """Fine-tuning defaults of one task.

    Args:
        batch_size: examples per step (for SWAG, questions, each with 4 sequences).
        epochs: passes over the training set.
        learning_rates: the grid searched on dev; one value where the paper fixes it.
        max_seq_length: WordPiece tokens per sequence, [CLS] and [SEP] included.
        doc_stride: SQuAD sliding-window stride over the context, in tokens.
        max_query_length: SQuAD questions are truncated to this many tokens.
    """
    batch_size: int
    epochs: int
    learning_rates: tuple[float, ...]
    max_seq_length: int
    doc_stride: Optional[int] = None
    max_query_length: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class DataFile:
    """One candidate file of a split.

    Args:
        path: relative to the data directory, in the standard layout of the data README.
        note: set when the file stands in for the official one (a subset, a
            reconstruction); readers log it and tables print it.
    """
    path: str
    note: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class GlueColumns:
    """Columns of a GLUE TSV file."""
    text_a: str
    text_b: Optional[str]
    labels: tuple[str, ...]  # label column names, the first one present is used
    no_header: Optional[tuple[str, ...]] = None  # column names of header-less files


class TaskSizes(NamedTuple):
    """Official example counts (train, labelled evaluation, unlabelled test); for time
    estimates only. MNLI's evaluation is matched + mismatched dev, its test adds AX."""
    train: int
    eval: int
    test: int


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What a task is: its output kind, labels, metrics, splits and defaults.

    Args:
        name: registry key, also the `--task` value.
        kind: one of `KINDS`.
        labels: class strings exactly as they appear in the data files; the index in
            this tuple is the class id. They are also the strings of the GLUE
            leaderboard submission files. NER: the BIO tag set. Empty for regression
            and span tasks.
        metrics: metric keys reported, named like the paper's columns.
        main_metric: the metric that picks the learning rate on dev.
        hparams: the paper's fine-tuning defaults.
        display_name: the dataset as the paper's tables name it ("SQuAD v1.1").
        files: split -> candidate files, official first (the first that exists is read).
        sizes: official example counts.
        source: key of `glue_suite.data_dir.SOURCES`: where the data is published.
        columns: the columns of GLUE TSV files; None for other formats.
        tfds_name: the tensorflow-datasets name (`--source tfds`); None where tfds
            has no such dataset.
        eval_splits: labelled evaluation splits (MNLI has two: matched, mismatched).
        submission_files: unlabelled GLUE test split -> leaderboard file name.
    """
    name: str
    kind: str
    labels: tuple[str, ...]
    metrics: tuple[str, ...]
    main_metric: str
    hparams: Hyperparams
    display_name: str
    files: dict[str, tuple[DataFile, ...]]
    sizes: TaskSizes
    source: str = "glue"
    columns: Optional[GlueColumns] = None
    tfds_name: Optional[str] = None
    eval_splits: tuple[str, ...] = ("dev",)
    submission_files: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name}: kind {self.kind!r} not in {KINDS}")
        if self.main_metric not in self.metrics:
            raise ValueError(f"task {self.name}: main_metric {self.main_metric!r} "
                             f"not in {self.metrics}")

    @property
    def num_labels(self) -> int:
        return len(self.labels)


# "We use a batch size of 32 and fine-tune for 3 epochs over the data for all GLUE tasks.
# For each task, we selected the best fine-tuning learning rate (among 5e-5, 4e-5, 3e-5,
# and 2e-5) on the Dev set." (Section 4.1)
_GLUE = Hyperparams(batch_size=32, epochs=3, learning_rates=(5e-5, 4e-5, 3e-5, 2e-5),
                    max_seq_length=128)
_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")


def _files(**splits) -> dict[str, tuple[DataFile, ...]]:
    """split=path or split=(path, DataFile, ...) -> {split: (DataFile, ...)}."""
    return {split: tuple(DataFile(p) if isinstance(p, str) else p
                         for p in ((paths,) if isinstance(paths, str) else paths))
            for split, paths in splits.items()}


def _with_gz(path: str) -> tuple[str, str]:
    return path, path + ".gz"


def _glue(name, display_name, directory, columns, sizes, labels, metrics, main_metric,
          kind=CLASSIFICATION):
    return TaskSpec(
        name=name, kind=kind, labels=labels, metrics=metrics, main_metric=main_metric,
        hparams=_GLUE, display_name=display_name,
        files=_files(**{s: f"glue_data/{directory}/{s}.tsv" for s in ("train", "dev", "test")}),
        sizes=sizes, columns=columns, tfds_name=f"glue/{name}",
        submission_files={"test": f"{display_name}.tsv"})


# The paper reports F1 for MRPC and QQP, Spearman for STS-B, MCC for CoLA and accuracy
# elsewhere (Table 1 caption); the other GLUE leaderboard numbers come along.
TASKS: dict[str, TaskSpec] = {
    # CoLA train/dev have no header: source, label, original label ("*"), sentence.
    "cola": _glue("cola", "CoLA", "CoLA",
                  GlueColumns("sentence", None, ("label",),
                              no_header=("source", "label", "original_label", "sentence")),
                  TaskSizes(8551, 1043, 1063), _BINARY, ("mcc",), "mcc"),
    "sst2": _glue("sst2", "SST-2", "SST-2", GlueColumns("sentence", None, ("label",)),
                  TaskSizes(67349, 872, 1821), _BINARY, ("accuracy",), "accuracy"),
    "mrpc": _glue("mrpc", "MRPC", "MRPC", GlueColumns("#1 String", "#2 String", ("Quality",)),
                  TaskSizes(3668, 408, 1725), _BINARY, ("f1", "accuracy"), "f1"),
    "stsb": _glue("stsb", "STS-B", "STS-B", GlueColumns("sentence1", "sentence2", ("score",)),
                  TaskSizes(5749, 1500, 1379), (), ("pearson", "spearman"), "spearman",
                  kind=REGRESSION),
    "qqp": _glue("qqp", "QQP", "QQP", GlueColumns("question1", "question2", ("is_duplicate",)),
                 TaskSizes(363846, 40430, 390965), _BINARY, ("f1", "accuracy"), "f1"),
    # One model, two dev sets; its test predictions fill three submission files
    # (the diagnostic set AX is predicted by the MNLI model). GLUE's MNLI files have
    # label1 ... gold_label; the 20k train subset has `label`.
    "mnli": TaskSpec(
        name="mnli", kind=CLASSIFICATION,
        labels=("contradiction", "entailment", "neutral"),  # google-research/bert's order
        metrics=("accuracy",), main_metric="accuracy", hparams=_GLUE, display_name="MNLI",
        files=_files(
            train=("glue_data/MNLI/train.tsv",
                   DataFile("glue_data/MNLI/train.random-subset-20000.tokenized.tsv",
                            "MNLI train: the 20k-pair PTB-tokenized subset (5% of 393k)")),
            dev_matched=("glue_data/MNLI/dev_matched.tsv",
                         "multinli_1.0/multinli_1.0_dev_matched.csv"),
            dev_mismatched=("glue_data/MNLI/dev_mismatched.tsv",
                            "multinli_1.0/multinli_1.0_dev_mismatched.csv"),
            test_matched="glue_data/MNLI/test_matched.tsv",
            test_mismatched="glue_data/MNLI/test_mismatched.tsv",
            ax="glue_data/diagnostic/diagnostic.tsv"),
        sizes=TaskSizes(392702, 19647, 20747), source="mnli",
        columns=GlueColumns("sentence1", "sentence2", ("gold_label", "label")),
        tfds_name="glue/mnli", eval_splits=("dev_matched", "dev_mismatched"),
        submission_files={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv",
                          "ax": "AX.tsv"}),
    "qnli": _glue("qnli", "QNLI", "QNLI", GlueColumns("question", "sentence", ("label",)),
                  TaskSizes(104743, 5463, 5463), _NLI2, ("accuracy",), "accuracy"),
    "rte": _glue("rte", "RTE", "RTE", GlueColumns("sentence1", "sentence2", ("label",)),
                 TaskSizes(2490, 277, 3000), _NLI2, ("accuracy",), "accuracy"),
    "wnli": _glue("wnli", "WNLI", "WNLI", GlueColumns("sentence1", "sentence2", ("label",)),
                  TaskSizes(635, 71, 146), _BINARY, ("accuracy",), "accuracy"),
    # "We fine-tune for 3 epochs with a learning rate of 5e-5 and a batch size of 32."
    # Windows of 384 tokens, stride 128, questions cut at 64 (google-research/bert).
    "squad1.1": TaskSpec(
        name="squad1.1", kind=SPAN, labels=(), metrics=("exact_match", "f1"),
        main_metric="f1",
        hparams=Hyperparams(batch_size=32, epochs=3, learning_rates=(5e-5,),
                            max_seq_length=384, doc_stride=128, max_query_length=64),
        display_name="SQuAD v1.1",
        files=_files(train=(*_with_gz("squad/v1.1/train-v1.1.json"),
                            DataFile("squad/v1.1/train-v1.1.reconstructed.json.gz",
                                     "SQuAD v1.1 train: reconstructed (synthetic ids, "
                                     "answer_start inferred)")),
                     dev=_with_gz("squad/v1.1/dev-v1.1.json")),
        sizes=TaskSizes(87599, 10570, 0), source="squad", tfds_name="squad/v1.1"),
    # "We fine-tuned for 2 epochs with a learning rate of 5e-5 and a batch size of 48."
    "squad2.0": TaskSpec(
        name="squad2.0", kind=SPAN, labels=(), metrics=("exact", "f1"), main_metric="f1",
        hparams=Hyperparams(batch_size=48, epochs=2, learning_rates=(5e-5,),
                            max_seq_length=384, doc_stride=128, max_query_length=64),
        display_name="SQuAD v2.0",
        files=_files(train=_with_gz("squad/v2.0/train-v2.0.json"),
                     dev=_with_gz("squad/v2.0/dev-v2.0.json")),
        sizes=TaskSizes(130319, 11873, 0), source="squad", tfds_name="squad/v2.0"),
    # "We fine-tune the model for 3 epochs with a learning rate of 2e-5 and a batch size
    # of 16." The paper gives no sequence length; 128 as for GLUE is our choice.
    # tensorflow-datasets has no SWAG (its hellaswag is another dataset).
    "swag": TaskSpec(
        name="swag", kind=MULTIPLE_CHOICE, labels=("0", "1", "2", "3"),
        metrics=("accuracy",), main_metric="accuracy",
        hparams=Hyperparams(batch_size=16, epochs=3, learning_rates=(2e-5,),
                            max_seq_length=128),
        display_name="SWAG",
        files=_files(train="swag/train.csv", dev="swag/val.csv", test="swag/test.csv"),
        sizes=TaskSizes(73546, 20006, 0), source="swag"),
    # The paper gives no NER fine-tuning hyperparameters. Our choice, inside Appendix
    # A.3's recommended ranges: batch 32, 3 epochs, lr from {5e-5, 3e-5, 2e-5} picked on
    # dev (eng.testa), 128-token windows. Tags are BIO (readers convert IOB1 files).
    "conll2003": TaskSpec(
        name="conll2003", kind=TOKEN,
        labels=("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
                "I-MISC"),
        metrics=("ner_f1", "ner_precision", "ner_recall"), main_metric="ner_f1",
        eval_splits=("dev", "test"),
        hparams=Hyperparams(batch_size=32, epochs=3, learning_rates=(5e-5, 3e-5, 2e-5),
                            max_seq_length=128),
        display_name="CoNLL-2003",
        files=_files(train=("conll2003/eng.train", "conll2003/bio/train.txt"),
                     dev=("conll2003/eng.testa", "conll2003/bio/valid.txt"),
                     test=("conll2003/eng.testb", "conll2003/bio/test.txt")),
        sizes=TaskSizes(14041, 6703, 0), source="conll2003", tfds_name="conll2003"),
}


def get_task(name: str) -> TaskSpec:
    """Returns `TASKS[name]` with an error that lists the known tasks."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


# The paper's grid (Section 4.1: 5e-5 ... 2e-5) is for BERT-Base and Large. Smaller BERTs
# want larger rates: Turc et al. 2019 ("Well-Read Students Learn Better", the 24 small
# BERTs of google-research/bert) pick from 3e-4, 1e-4, 5e-5, 3e-5 (and 4 epochs; we keep
# the task's). Their 3e-4 is left out: on the default checkpoint (MiniLM, H=384) RTE
# already fell under the majority class at 2e-4 (dev accuracy 52.5 +- 1.3 over 2 seeds,
# against 57.4 +- 1.0 at 1e-4 and 56.3 +- 0.5 at 5e-5; results/glue_suite/README.md).
SMALL_MODEL_LEARNING_RATES = (1e-4, 5e-5, 3e-5)
BASE_HIDDEN_SIZE = 768  # smaller hidden sizes get SMALL_MODEL_LEARNING_RATES


def default_learning_rates(spec: TaskSpec, hidden_size: int) -> tuple[tuple, str]:
    """(the learning-rate grid, why) a run of `spec` searches on a checkpoint of
    `hidden_size` when none is named: the task's (the paper's) for Base and Large; for
    smaller models SMALL_MODEL_LEARNING_RATES where the task searches a grid (tasks with
    one fixed rate, SQuAD and SWAG, keep it)."""
    task_rates = spec.hparams.learning_rates
    if hidden_size >= BASE_HIDDEN_SIZE or len(task_rates) == 1:
        return task_rates, f"the task's (the paper's), hidden size {hidden_size}"
    return SMALL_MODEL_LEARNING_RATES, (
        f"small-BERT grid (Turc et al. 2019, without 3e-4): hidden size {hidden_size} "
        f"< {BASE_HIDDEN_SIZE}")
