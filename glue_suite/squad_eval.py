"""The official SQuAD v1.1 and v2.0 scores, re-implemented with the same rules.

Both official scripts (rajpurkar.github.io/SQuAD-explorer) lower-case, drop ASCII
punctuation, drop the articles a/an/the and collapse whitespace before comparing; F1 is
over the resulting bag of tokens, maxed over the gold answers. They differ in the
corner cases, which are kept here:

  v1.1: every gold answer counts; an empty prediction scores F1 0; a missing
        prediction scores 0 and still counts in the total.
  v2.0: gold answers that normalise to "" are dropped, an unanswerable question's only
        answer is ""; F1 is 1 when prediction and gold are both empty. `na_probs`
        (e.g. BERT's null_odds.json) marks a prediction null when above
        `na_prob_thresh`, and the best threshold for EM and F1 is searched on them.

Scores are percentages, keyed as the official scripts print them.
"""

import collections
import logging
import re
import string
from typing import Optional

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower case, remove punctuation, then articles, then extra whitespace."""
    s = "".join(c for c in s.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _token_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def f1_v1(prediction: str, gold: str) -> float:
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def f1_v2(prediction: str, gold: str) -> float:
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        # No-answer on either side: 1 if both are empty, else 0.
        return float(prediction_tokens == gold_tokens)
    return _token_f1(prediction_tokens, gold_tokens)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _questions(dataset: list):
    """Yields every question dict of the SQuAD `data` list, in file order."""
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def select_questions(dataset: list, qids) -> list:
    """The dataset restricted to `qids` (to score a run on a subset of dev)."""
    qids = set(qids)
    return [{"paragraphs": [{"qas": [qa]}]} for qa in _questions(dataset) if qa["id"] in qids]


def evaluate_v1(dataset: list, predictions: dict[str, str]) -> dict[str, float]:
    """Official SQuAD v1.1 scores.

    Args:
        dataset: the `data` list of a SQuAD JSON file.
        predictions: question id -> answer text.

    Returns:
        {"exact_match", "f1"} in percent.
    """
    exact, f1, missing = [], [], 0
    for qa in _questions(dataset):
        golds = [answer["text"] for answer in qa["answers"]]
        if qa["id"] not in predictions:
            missing += 1
            exact.append(0.0)
            f1.append(0.0)
            continue
        prediction = predictions[qa["id"]]
        exact.append(max(exact_match(prediction, g) for g in golds))
        f1.append(max(f1_v1(prediction, g) for g in golds))
    if missing:
        logger.warning("%d unanswered questions score 0", missing)
    return {"exact_match": 100.0 * sum(exact) / len(exact), "f1": 100.0 * sum(f1) / len(f1)}


def _best_threshold(predictions, scores, na_probs, has_answer) -> tuple[float, float]:
    """The official threshold search: start with every question answered null, then
    un-null them in increasing `na_prob`, keeping the first best running score.

    As in the official script, a prediction such as "the ." that normalises to "" counts
    as an answer here (it loses the null credit) but as "no answer" in exact/f1, so the
    best score can fall below the score at the default threshold.
    """
    score = best = sum(1 for qid in scores if not has_answer[qid])
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1  # answering an unanswerable question loses its null credit
        if score > best:
            best, best_threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


def evaluate_v2(dataset: list, predictions: dict[str, str],
                na_probs: Optional[dict[str, float]] = None,
                na_prob_thresh: float = 1.0) -> dict[str, float]:
    """Official SQuAD v2.0 scores.

    Args:
        dataset: the `data` list of a SQuAD v2.0 JSON file (use `select_questions` to
            score a subset).
        predictions: question id -> answer text ("" = no answer), for every question.
        na_probs: question id -> no-answer score (null_odds.json); when given, the
            `best_*` keys report the best threshold on it, as the official script does
            with --na-prob-file.
        na_prob_thresh: predictions with na_prob above it count as "no answer".

    Returns:
        exact, f1, total, HasAns_{exact,f1,total}, NoAns_{exact,f1,total} (the groups
        present) and, with `na_probs`, best_exact, best_exact_thresh, best_f1,
        best_f1_thresh.
    """
    questions = list(_questions(dataset))
    missing = [qa["id"] for qa in questions if qa["id"] not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} of {len(questions)} questions have no prediction "
                         f"(e.g. {missing[:3]}); predict every question, or score a "
                         f"subset with select_questions(dataset, predictions)")
    if na_probs is not None:
        missing = [qa["id"] for qa in questions if qa["id"] not in na_probs]
        if missing:
            raise ValueError(f"{len(missing)} questions have no na_prob (e.g. {missing[:3]})")

    has_answer, exact_raw, f1_raw = {}, {}, {}
    for qa in questions:
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        exact_raw[qid] = max(exact_match(predictions[qid], g) for g in golds)
        f1_raw[qid] = max(f1_v2(predictions[qid], g) for g in golds)

    # A prediction above the null threshold counts as "no answer".
    null_probs = na_probs if na_probs is not None else {}
    is_null = {qid: null_probs.get(qid, 0.0) > na_prob_thresh for qid in has_answer}
    exact = {q: float(not has_answer[q]) if is_null[q] else s for q, s in exact_raw.items()}
    f1 = {q: float(not has_answer[q]) if is_null[q] else s for q, s in f1_raw.items()}

    def group(qids):
        return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
                "f1": 100.0 * sum(f1[q] for q in qids) / len(qids),
                "total": len(qids)}

    result = group(list(has_answer))
    for prefix, want in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, has in has_answer.items() if has == want]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in group(qids).items()})
    if na_probs is not None:
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(
            predictions, exact_raw, na_probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(
            predictions, f1_raw, na_probs, has_answer)
    return result
