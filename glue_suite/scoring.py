"""Model outputs -> predictions -> metrics, per split, and the learning-rate x seed grid's
summary.

    predict (glue_suite.finetune) -> evaluate: class ids, scores, NER tags or SQuAD
    answers, and the task's metrics (glue_suite.metrics, the official SQuAD scorer)
    -> summarize_grid: the best run on dev, mean +- std per learning rate
"""

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

from bert_tf.tokenization import BertTokenizer
from glue_suite import metrics as glue_metrics
from glue_suite import readers, squad_postprocess
from glue_suite.tasks import REGRESSION, SPAN, TOKEN, TaskSpec


@dataclasses.dataclass(frozen=True)
class SquadOptions:
    """Post-processing of SQuAD logits (the original's defaults)."""
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0


@dataclasses.dataclass
class Evaluation:
    """Predictions of one split and, if labelled, its metrics.

    Args:
        predictions: class ids [N] (classification, SWAG), scores [N] (STS-B), tag lists
            per sentence (NER) or `SquadPredictions`.
        metrics: the task's metrics in percent (empty for unlabelled splits).
        degenerate: every prediction is the same (see `metrics.is_degenerate`).
    """
    predictions: object
    metrics: dict
    degenerate: bool


def ner_tags(spec: TaskSpec, sentences: Sequence[readers.NerSentence], features: dict,
             logits: np.ndarray) -> list[list[str]]:
    """Token logits [F, T, L] -> one tag per word of every sentence (from the word's
    first piece; a word without pieces is tagged O)."""
    ids = np.argmax(logits, axis=-1)  # [F, T]
    tags = [["O"] * len(s.words) for s in sentences]
    rows, positions = np.nonzero(features["word_index"] >= 0)
    for f, t in zip(rows, positions):
        sentence = features["sentence_index"][f]
        tags[sentence][features["word_index"][f, t]] = spec.labels[ids[f, t]]
    return tags


def evaluate(spec: TaskSpec, examples: Sequence, features: dict, outputs, labelled: bool,
             tokenizer: Optional[BertTokenizer] = None,
             squad: Optional[SquadOptions] = None) -> Evaluation:
    """Decodes model outputs into predictions and scores them (if `labelled`).

    Args:
        spec: the task being evaluated (for SQuAD v2.0 with a v1.1-trained model,
            the v2.0 spec).
        examples, features: the split, as featurized.
        outputs: `predict(...)` of the features.
        labelled: the examples have gold labels.
        tokenizer: SQuAD: vocabulary and lower-casing for the text recovery.
        squad: SQuAD post-processing options.
    """
    if spec.kind == SPAN:
        squad = squad or SquadOptions()
        version_2 = spec.name == "squad2.0"
        result = squad_postprocess.postprocess(
            examples, features, outputs["start_logits"], outputs["end_logits"],
            tokenizer.vocab, tokenizer.lower_case, version_2=version_2,
            n_best_size=squad.n_best_size, max_answer_length=squad.max_answer_length,
            null_score_diff_threshold=squad.null_score_diff_threshold)
        scores = squad_postprocess.score(
            examples, result, version_2=version_2,
            null_score_diff_threshold=squad.null_score_diff_threshold) if labelled else {}
        degenerate = len(set(result.predictions.values())) <= 1
        return Evaluation(result, scores, degenerate)
    if spec.kind == TOKEN:
        tags = ner_tags(spec, examples, features, outputs)
        scores = glue_metrics.compute_metrics(
            spec.name, tags, [list(s.tags) for s in examples]) if labelled else {}
        return Evaluation(tags, scores, glue_metrics.is_degenerate(
            [t for sentence in tags for t in sentence]))
    predictions = outputs if spec.kind == REGRESSION else np.argmax(outputs, axis=-1)
    scores = glue_metrics.compute_metrics(
        spec.name, predictions, readers.example_labels(spec.name, examples)) if labelled else {}
    return Evaluation(predictions, scores, glue_metrics.is_degenerate(predictions))


# ---------------------------------------------------------------------------------------
# Grid of learning rates x seeds
# ---------------------------------------------------------------------------------------

def _value(metrics: dict, name: str) -> float:
    """The metric as a float for ranking; NaN and missing rank last."""
    value = metrics.get(name)
    return -math.inf if value is None or not math.isfinite(value) else float(value)


def summarize_grid(runs: Sequence[dict], main_metric: str) -> dict:
    """Best run on dev and mean +- std over seeds for each learning rate.

    Args:
        runs: [{"learning_rate", "seed", "metrics": {...}, "degenerate": bool}, ...].
        main_metric: the metric that ranks runs (`TaskSpec.main_metric`).

    Returns:
        {"main_metric", "best": index into runs, "best_learning_rate", "best_seed",
         "best_value", "by_learning_rate": [{"learning_rate", "runs", "degenerate_runs",
         "mean": {metric: value}, "std": {metric: sample std, 0 for one run}}],
         "degenerate_runs": [indices]}. NaN metrics (e.g. Pearson of a constant) rank last
         and are left out of means.
    """
    if not runs:
        raise ValueError("no runs to summarize")
    best = max(range(len(runs)), key=lambda i: (_value(runs[i]["metrics"], main_metric), -i))
    by_lr = []
    for lr in dict.fromkeys(r["learning_rate"] for r in runs):  # first-seen order
        group = [r for r in runs if r["learning_rate"] == lr]
        mean, std = {}, {}
        for name in group[0]["metrics"]:
            values = np.array([r["metrics"].get(name) for r in group], np.float64)
            values = values[np.isfinite(values)]
            mean[name] = float(values.mean()) if len(values) else float("nan")
            std[name] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        by_lr.append({"learning_rate": lr, "runs": len(group),
                      "degenerate_runs": sum(bool(r["degenerate"]) for r in group),
                      "mean": mean, "std": std})
    return {"main_metric": main_metric, "best": best,
            "best_learning_rate": runs[best]["learning_rate"],
            "best_seed": runs[best]["seed"],
            "best_value": runs[best]["metrics"].get(main_metric),
            "by_learning_rate": by_lr,
            "degenerate_runs": [i for i, r in enumerate(runs) if r["degenerate"]]}
