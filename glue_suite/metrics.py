"""Whole-set metrics, computed in numpy after prediction, named like the paper's columns.

Every value is a percentage (accuracy 84.6, MCC 52.1, Spearman 86.5), as in the paper's
tables and the official SQuAD scripts (SQuAD is scored by `glue_suite.squad_eval`).
Tests check each formula against scikit-learn, scipy and seqeval.
"""

from typing import Sequence

import numpy as np

from glue_suite.tasks import CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION, TOKEN, get_task


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    return 100.0 * float(np.mean(predictions == labels))


def binary_f1(predictions: np.ndarray, labels: np.ndarray, positive: int = 1) -> float:
    """F1 of the positive class (MRPC "1" = paraphrase, QQP "1" = duplicate); 0 when
    there is no true positive (scikit-learn's zero_division=0)."""
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    return 100.0 * float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation (multiclass form of Gorodkin 2004, as scikit-learn); 0 when
    either side is constant."""
    classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    n = len(labels)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)  # [true, pred]
    np.add.at(confusion, (codes[:n], codes[n:]), 1)
    t_sum, p_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, total = np.trace(confusion), confusion.sum()
    cov_tp = correct * total - t_sum @ p_sum
    cov_pp = total ** 2 - p_sum @ p_sum
    cov_tt = total ** 2 - t_sum @ t_sum
    if cov_pp * cov_tt == 0:
        return 0.0
    return 100.0 * float(cov_tp / np.sqrt(cov_tt * cov_pp))


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Pearson r; NaN when either side is constant (as scipy)."""
    x = predictions - predictions.mean()
    y = labels - labels.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    if denominator == 0:
        return float("nan")
    return 100.0 * float(np.clip((x @ y) / denominator, -1.0, 1.0))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties get their mean rank (scipy.stats.rankdata's "average")."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # rank of the last member of each group of ties
    return (last - (counts - 1) / 2.0)[inverse]


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Spearman rho = Pearson r of the average ranks."""
    return pearson(_average_ranks(predictions), _average_ranks(labels))


# ---------------------------------------------------------------------------------------
# Entity-level F1 with conlleval's chunk rules
# ---------------------------------------------------------------------------------------

_SCHEMES = ("iob1", "bio")


def _split_tag(tag: str) -> tuple[str, str]:
    """"B-PER" -> ("B", "PER"); "O" -> ("O", "") (conlleval splits at the first '-')."""
    prefix, _, entity_type = tag.partition("-")
    if prefix not in ("B", "I", "O") or (prefix == "O") != (tag == "O"):
        raise ValueError(f"tag {tag!r} is not O, B-TYPE or I-TYPE")
    return prefix, entity_type


def _end_of_chunk(prev_tag, tag, prev_type, entity_type) -> bool:
    # conlleval.pl endOfChunk, restricted to B/I/O tags.
    return (prev_tag in ("B", "I") and tag in ("B", "O")) or (
        prev_tag != "O" and prev_type != entity_type)


def _start_of_chunk(prev_tag, tag, prev_type, entity_type) -> bool:
    # conlleval.pl startOfChunk: B always starts; I starts after O (this is what reads
    # IOB1, where a chunk starts with I-) or after a chunk of another type.
    return tag == "B" or (prev_tag == "O" and tag == "I") or (
        tag != "O" and prev_type != entity_type)


def chunks(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """Entities of one sentence as {(first, last, type)}, decoded with conlleval's rules."""
    spans = set()
    prev_tag, prev_type, begin = "O", "", 0
    for i, (tag, entity_type) in enumerate([_split_tag(t) for t in tags] + [("O", "")]):
        if _end_of_chunk(prev_tag, tag, prev_type, entity_type):
            spans.add((begin, i - 1, prev_type))
        if _start_of_chunk(prev_tag, tag, prev_type, entity_type):
            begin = i
        prev_tag, prev_type = tag, entity_type
    return spans


def _check_scheme(tags: Sequence[str], scheme: str, sentence: int) -> None:
    """Gold tags must follow the declared scheme: in BIO an entity starts with B-; in
    IOB1 B- only separates two adjacent entities of the same type."""
    prev = "O"
    for tag in tags:
        prefix, entity_type = _split_tag(tag)
        continues = prev != "O" and prev[2:] == entity_type
        if scheme == "bio" and prefix == "I" and not continues:
            raise ValueError(f"gold sentence {sentence}: {tag} after {prev} is not BIO "
                             f"(IOB1 data? pass scheme='iob1' or convert with "
                             f"readers.to_bio)")
        if scheme == "iob1" and prefix == "B" and not continues:
            raise ValueError(f"gold sentence {sentence}: {tag} after {prev} is not IOB1 "
                             f"(BIO data? pass scheme='bio')")
        prev = tag


def entity_f1(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]],
              scheme: str = "bio") -> dict[str, float]:
    """Entity-level precision, recall and F1 (percent), exactly as conlleval.pl scores.

    An entity counts as correct when type, first and last word all match. Entities never
    cross sentences. conlleval's rules decode IOB1 and BIO alike (an I- after O or after
    another type starts an entity), so predictions may use either; `scheme` states what
    the gold tags use and they are checked against it, which catches IOB1 gold labelled
    as BIO.

    Args:
        true_tags: gold tags, one sequence per sentence.
        pred_tags: predicted tags, same shape.
        scheme: "iob1" or "bio", the gold tags' scheme.

    Returns:
        {"precision", "recall", "f1", "num_gold", "num_pred", "num_correct"}.
    """
    if scheme not in _SCHEMES:
        raise ValueError(f"scheme {scheme!r} not in {_SCHEMES}")
    if len(true_tags) != len(pred_tags):
        raise ValueError(f"{len(true_tags)} gold sentences, {len(pred_tags)} predicted")
    num_gold = num_pred = num_correct = 0
    for i, (gold, pred) in enumerate(zip(true_tags, pred_tags)):
        if len(gold) != len(pred):
            raise ValueError(f"sentence {i}: {len(gold)} gold tags, {len(pred)} predicted")
        _check_scheme(gold, scheme, i)
        gold_chunks, pred_chunks = chunks(gold), chunks(pred)
        num_gold += len(gold_chunks)
        num_pred += len(pred_chunks)
        num_correct += len(gold_chunks & pred_chunks)
    precision = 100.0 * num_correct / num_pred if num_pred else 0.0
    recall = 100.0 * num_correct / num_gold if num_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "num_gold": num_gold,
            "num_pred": num_pred, "num_correct": num_correct}


# ---------------------------------------------------------------------------------------
# Per task
# ---------------------------------------------------------------------------------------

_FUNCTIONS = {"accuracy": accuracy, "f1": binary_f1, "mcc": matthews_corrcoef,
              "pearson": pearson, "spearman": spearman}


def compute_metrics(task: str, predictions, labels) -> dict[str, float]:
    """The task's metrics (`TASKS[task].metrics`), in percent.

    Args:
        task: a task name; SQuAD is scored by `glue_suite.squad_eval` instead.
        predictions: class ids [N] (classification, SWAG), scores [N] (STS-B), or
            tag sequences per sentence (CoNLL-2003).
        labels: gold labels of the same form (`readers.example_labels`).
    """
    spec = get_task(task)
    if spec.kind == TOKEN:
        scores = entity_f1(labels, predictions, scheme="bio")
        return {f"ner_{k}": scores[k] for k in ("f1", "precision", "recall")}
    if spec.kind not in (CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE):
        raise ValueError(f"task {task} is scored by glue_suite.squad_eval, not here")
    dtype = np.float64 if spec.kind == REGRESSION else np.int64
    predictions, labels = np.asarray(predictions, dtype), np.asarray(labels, dtype)
    if predictions.shape != labels.shape or predictions.ndim != 1:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} must "
                         f"be equal-length vectors")
    if len(labels) == 0:
        raise ValueError("no examples to score")
    return {name: _FUNCTIONS[name](predictions, labels) for name in spec.metrics}


def is_degenerate(predictions) -> bool:
    """True when every prediction is the same class, or the scores are constant
    (max - min <= 1e-6) — a run that learned nothing (e.g. MRPC accuracy 68.4, the
    share of paraphrases)."""
    predictions = np.asarray(predictions).ravel()
    if predictions.size == 0:
        return False
    if predictions.dtype.kind == "f":
        return bool(np.ptp(predictions) <= 1e-6)
    return len(np.unique(predictions)) == 1
