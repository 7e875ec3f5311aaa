"""The fine-tuning tasks of the BERT paper (Devlin et al. 2018), plus CoNLL-2003 NER.

`TASKS` is the registry: one plain dict, task name -> `TaskSpec`. Hyperparameters are the
paper's (Section 4 and Appendix A.3); where the paper gives none the choice is marked.

Metric values everywhere in `glue_suite` are percentages, as in the paper's tables and
the official SQuAD scripts (MRPC accuracy 84.6, CoLA MCC 52.1, SQuAD F1 88.5).
"""

import dataclasses
from typing import Optional

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
        eval_splits: labelled evaluation splits (MNLI has two: matched, mismatched).
        submission_files: unlabelled GLUE test split -> leaderboard file name.
    """
    name: str
    kind: str
    labels: tuple[str, ...]
    metrics: tuple[str, ...]
    main_metric: str
    hparams: Hyperparams
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


def _glue(name, labels, metrics, main_metric, submission, kind=CLASSIFICATION):
    return TaskSpec(name=name, kind=kind, labels=labels, metrics=metrics,
                    main_metric=main_metric, hparams=_GLUE,
                    submission_files={"test": submission})


# The paper reports F1 for MRPC and QQP, Spearman for STS-B, MCC for CoLA and accuracy
# elsewhere (Table 1 caption); the other GLUE leaderboard numbers come along.
TASKS: dict[str, TaskSpec] = {
    "cola": _glue("cola", _BINARY, ("mcc",), "mcc", "CoLA.tsv"),
    "sst2": _glue("sst2", _BINARY, ("accuracy",), "accuracy", "SST-2.tsv"),
    "mrpc": _glue("mrpc", _BINARY, ("f1", "accuracy"), "f1", "MRPC.tsv"),
    "stsb": _glue("stsb", (), ("pearson", "spearman"), "spearman", "STS-B.tsv",
                  kind=REGRESSION),
    "qqp": _glue("qqp", _BINARY, ("f1", "accuracy"), "f1", "QQP.tsv"),
    # One model, two dev sets; its test predictions fill three submission files
    # (the diagnostic set AX is predicted by the MNLI model).
    "mnli": TaskSpec(
        name="mnli", kind=CLASSIFICATION,
        labels=("contradiction", "entailment", "neutral"),  # google-research/bert's order
        metrics=("accuracy",), main_metric="accuracy", hparams=_GLUE,
        eval_splits=("dev_matched", "dev_mismatched"),
        submission_files={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv",
                          "ax": "AX.tsv"}),
    "qnli": _glue("qnli", _NLI2, ("accuracy",), "accuracy", "QNLI.tsv"),
    "rte": _glue("rte", _NLI2, ("accuracy",), "accuracy", "RTE.tsv"),
    "wnli": _glue("wnli", _BINARY, ("accuracy",), "accuracy", "WNLI.tsv"),
    # "We fine-tune for 3 epochs with a learning rate of 5e-5 and a batch size of 32."
    # Windows of 384 tokens, stride 128, questions cut at 64 (google-research/bert).
    "squad1.1": TaskSpec(
        name="squad1.1", kind=SPAN, labels=(), metrics=("exact_match", "f1"),
        main_metric="f1",
        hparams=Hyperparams(batch_size=32, epochs=3, learning_rates=(5e-5,),
                            max_seq_length=384, doc_stride=128, max_query_length=64)),
    # "We fine-tuned for 2 epochs with a learning rate of 5e-5 and a batch size of 48."
    "squad2.0": TaskSpec(
        name="squad2.0", kind=SPAN, labels=(), metrics=("exact", "f1"), main_metric="f1",
        hparams=Hyperparams(batch_size=48, epochs=2, learning_rates=(5e-5,),
                            max_seq_length=384, doc_stride=128, max_query_length=64)),
    # "We fine-tune the model for 3 epochs with a learning rate of 2e-5 and a batch size
    # of 16." The paper gives no sequence length; 128 as for GLUE is our choice.
    "swag": TaskSpec(
        name="swag", kind=MULTIPLE_CHOICE, labels=("0", "1", "2", "3"),
        metrics=("accuracy",), main_metric="accuracy",
        hparams=Hyperparams(batch_size=16, epochs=3, learning_rates=(2e-5,),
                            max_seq_length=128)),
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
                            max_seq_length=128)),
}


def get_task(name: str) -> TaskSpec:
    """Returns `TASKS[name]` with an error that lists the known tasks."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]
