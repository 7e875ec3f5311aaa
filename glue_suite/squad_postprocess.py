"""SQuAD start/end logits -> answer texts, as google-research/bert's `write_predictions`.

For every question:
  1. In each window, the n_best (20) highest start and end logits form candidate spans;
     a span is kept if both ends lie in the context, the start token has its maximal
     context in this window, end >= start and it is at most max_answer_length (30)
     tokens long.
  2. Candidates are ranked by start + end logit; each span's text is recovered from the
     original paragraph (`get_final_text`), duplicates dropped, n_best kept.
  3. SQuAD v2.0: the null score is the smallest [CLS] start + end logit over the
     windows; "no answer" is predicted when null score - best non-null span score
     exceeds `null_score_diff_threshold`. That difference is the question's entry in
     `null_odds.json`, on which the official script searches the best threshold.
"""

import collections
import dataclasses
import math
import unicodedata
from typing import Sequence

import numpy as np

from glue_suite import squad_eval
from glue_suite.squad_readers import SquadExample

# ---------------------------------------------------------------------------------------
# The original BasicTokenizer (google-research/bert tokenization.py), in Python: the
# text recovery aligns characters of its output with the paragraph.
# ---------------------------------------------------------------------------------------


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # All non-alphanumeric ASCII counts as punctuation ("$", "^", "`" are not P*).
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or
            0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text: str, lower_case: bool) -> list[str]:
    """The original `BasicTokenizer.tokenize`: clean, split CJK, whitespace, lower case
    and strip accents, split punctuation."""
    chars = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            continue
        if _is_whitespace(char):
            chars.append(" ")
        elif _is_cjk(cp):
            chars += [" ", char, " "]
        else:
            chars.append(char)
    tokens = []
    for token in "".join(chars).split():
        if lower_case:
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(c for c in token if unicodedata.category(c) != "Mn")
        word = []
        for char in token:
            if _is_punctuation(char):
                if word:
                    tokens.append("".join(word))
                    word = []
                tokens.append(char)
            else:
                word.append(char)
        if word:
            tokens.append("".join(word))
    return tokens


def _strip_spaces(text: str):
    """(text without spaces, {index in it: index in text})."""
    kept = [(i, c) for i, c in enumerate(text) if c != " "]
    return "".join(c for _, c in kept), {j: i for j, (i, _) in enumerate(kept)}


def get_final_text(pred_text: str, orig_text: str, lower_case: bool) -> str:
    """The original `get_final_text`: project the normalised prediction back onto the
    paragraph's characters.

    pred_text "steve smith" and orig_text "Steve Smith's" give "Steve Smith": orig_text is
    basic-tokenized, the two are aligned character by character (ignoring spaces), and
    the prediction's span is cut from orig_text. If the alignment fails, orig_text is
    returned whole.
    """
    tok_text = " ".join(basic_tokenize(orig_text, lower_case))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig_text
    tok_s_to_ns = {s: ns for ns, s in tok_ns_to_s.items()}
    if start not in tok_s_to_ns or end not in tok_s_to_ns:
        return orig_text
    orig_start = orig_ns_to_s.get(tok_s_to_ns[start])
    orig_end = orig_ns_to_s.get(tok_s_to_ns[end])
    if orig_start is None or orig_end is None:
        return orig_text
    return orig_text[orig_start:orig_end + 1]


# ---------------------------------------------------------------------------------------
# n-best
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class SquadPredictions:
    """Post-processed predictions, keyed by question id.

    Args:
        predictions: answer text at `null_score_diff_threshold` ("" = no answer).
        nbest: the n-best list, [{"text", "probability", "start_logit", "end_logit"}].
        best_non_null: the best non-empty answer (v2.0; equals `predictions` for v1.1).
        null_odds: v2.0: null score - best non-null score (null_odds.json); empty for v1.1.
    """
    predictions: dict
    nbest: dict
    best_non_null: dict
    null_odds: dict


def _softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    return [e / sum(exps) for e in exps]


def _candidates(start_logits, end_logits, to_orig, is_max, n_best_size, max_answer_length):
    """Valid (start, end) spans of one window among the top-n_best starts and ends, in
    the original's loop order (start rank, then end rank)."""
    # Stable sort of the negated logits = Python's stable sorted(reverse=True).
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]  # [n]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]      # [n]
    s, e = starts[:, None], ends[None, :]                              # [n, 1], [1, n]
    valid = ((to_orig[s] >= 0) & (to_orig[e] >= 0) & is_max[s] & (e >= s) &
             (e - s + 1 <= max_answer_length))                         # [n, n]
    i, j = np.nonzero(valid)  # row-major: the original's nested loops
    return zip(starts[i].tolist(), ends[j].tolist())


def postprocess(examples: Sequence[SquadExample], features: dict, start_logits: np.ndarray,
                end_logits: np.ndarray, vocab: Sequence[str], lower_case: bool, *,
                version_2: bool, n_best_size: int = 20, max_answer_length: int = 30,
                null_score_diff_threshold: float = 0.0) -> SquadPredictions:
    """Logits of every window -> answer texts for every example.

    Args:
        examples: the examples the features were made from (`example_index` order).
        features: `glue_suite.features.squad_features` arrays (input_ids,
            example_index, token_to_orig, token_is_max_context).
        start_logits, end_logits: [F, T] float.
        vocab: id -> WordPiece string (`BertTokenizer.vocab`).
        lower_case: the tokenizer's lower-casing (for `get_final_text`).
        version_2: SQuAD v2.0 (null answers).
        n_best_size, max_answer_length, null_score_diff_threshold: as in the original.
    """
    windows = collections.defaultdict(list)
    for f, i in enumerate(features["example_index"]):
        windows[int(i)].append(f)
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)

    result = SquadPredictions({}, {}, {}, {})
    for i, example in enumerate(examples):
        prelim, null = _ranked_spans(windows[i], features, start_logits, end_logits,
                                     version_2, n_best_size, max_answer_length)
        nbest = _nbest(example, prelim, null, features, vocab, lower_case, n_best_size)
        _record(result, example.qas_id, nbest, null, version_2, null_score_diff_threshold)
    return result


def _ranked_spans(windows, features, start_logits, end_logits, version_2, n_best_size,
                  max_answer_length):
    """Candidate spans of one example's windows, best first, and its null score.

    Returns:
        prelim: [(score, window, start, end, start logit, end logit)]; the null answer
            is the entry whose window is None.
        null: (score, start logit, end logit) of the window with the lowest null score,
            or None (SQuAD v1.1).
    """
    prelim, null = [], None
    for f in windows:
        starts, ends = start_logits[f], end_logits[f]
        if version_2 and (null is None or starts[0] + ends[0] < null[0]):
            null = (starts[0] + ends[0], starts[0], ends[0])
        for s, e in _candidates(starts, ends, features["token_to_orig"][f],
                                features["token_is_max_context"][f], n_best_size,
                                max_answer_length):
            prelim.append((starts[s] + ends[e], f, s, e, starts[s], ends[e]))
    if null is not None:
        prelim.append((null[0], None, 0, 0, null[1], null[2]))
    prelim.sort(key=lambda p: p[0], reverse=True)  # stable, as the original
    return prelim, null


def _nbest(example, prelim, null, features, vocab, lower_case, n_best_size) -> list:
    """The n best distinct answer texts [(text, start logit, end logit)], each cut from
    the original paragraph text."""
    nbest, seen = [], set()
    for _, f, s, e, start_logit, end_logit in prelim:
        if len(nbest) >= n_best_size:
            break
        if f is None:
            text = ""
        else:
            pieces = " ".join(vocab[t] for t in features["input_ids"][f][s:e + 1])
            pred_text = " ".join(pieces.replace(" ##", "").replace("##", "").split())
            to_orig = features["token_to_orig"][f]
            orig_text = " ".join(example.doc_tokens[to_orig[s]:to_orig[e] + 1])
            text = get_final_text(pred_text, orig_text, lower_case)
            if text in seen:
                continue
        seen.add(text)
        nbest.append((text, float(start_logit), float(end_logit)))
    if null is not None and "" not in seen:
        nbest.append(("", float(null[1]), float(null[2])))
    if not nbest:  # no valid span at all (e.g. an empty paragraph)
        nbest.append(("empty", 0.0, 0.0))
    return nbest


def _record(result: SquadPredictions, qas_id: str, nbest: list, null, version_2: bool,
            null_score_diff_threshold: float) -> None:
    """Stores one example's n-best list, answer, best non-null answer and null odds."""
    probabilities = _softmax([s + e for _, s, e in nbest])
    result.nbest[qas_id] = [
        {"text": t, "probability": p, "start_logit": s, "end_logit": e}
        for (t, s, e), p in zip(nbest, probabilities)]
    best = next(((t, s, e) for t, s, e in nbest if t), None)
    if not version_2:
        result.predictions[qas_id] = nbest[0][0]
        result.best_non_null[qas_id] = nbest[0][0]
    elif best is None:  # only the null answer
        result.null_odds[qas_id] = float(null[0])
        result.predictions[qas_id] = ""
        result.best_non_null[qas_id] = ""
    else:
        score_diff = float(null[0] - best[1] - best[2])
        result.null_odds[qas_id] = score_diff
        result.best_non_null[qas_id] = best[0]
        result.predictions[qas_id] = (
            "" if score_diff > null_score_diff_threshold else best[0])


# ---------------------------------------------------------------------------------------
# Scoring (the files: glue_suite.predictions)
# ---------------------------------------------------------------------------------------

def gold_dataset(examples: Sequence[SquadExample]) -> list:
    """The examples as a SQuAD `data` list for `squad_eval` (all gold answers kept)."""
    return [{"paragraphs": [{"qas": [
        {"id": e.qas_id, "answers": [{"text": a} for a in e.answers]} for e in examples]}]}]


def score(examples: Sequence[SquadExample], result: SquadPredictions, *, version_2: bool,
          null_score_diff_threshold: float = 0.0) -> dict:
    """Official metrics of the predictions on `examples`.

    v1.1: {"exact_match", "f1"}. v2.0: the official keys at the threshold (exact, f1,
    HasAns_*, NoAns_*) and the best-threshold search (best_exact, best_exact_thresh,
    best_f1, best_f1_thresh). The search scores the best non-null answers with
    null_odds, so every threshold is reachable, not only those above the one used.
    """
    dataset = gold_dataset(examples)
    if not version_2:
        return squad_eval.evaluate_v1(dataset, result.predictions)
    return squad_eval.evaluate_v2(dataset, result.best_non_null, result.null_odds,
                                  na_prob_thresh=null_score_diff_threshold)


def best_f1_threshold(examples: Sequence[SquadExample], result: SquadPredictions) -> float:
    """The null_odds threshold with the best F1 (v2.0), the official script's search.

    The official `best_f1_thresh` is 0.0 when answering no question at all is best (its
    starting value), which is not a threshold on score differences; this returns -inf
    then, so that `at_threshold` reproduces `best_f1`.
    """
    has_answer = {e.qas_id: bool(e.answers) for e in examples}
    f1 = {}
    for e in examples:
        golds = [a for a in e.answers if squad_eval.normalize_answer(a)] or [""]
        f1[e.qas_id] = max(squad_eval.f1_v2(result.best_non_null[e.qas_id], g) for g in golds)
    score = best = sum(not has for has in has_answer.values())
    threshold = -math.inf
    for qid in sorted(f1, key=lambda q: result.null_odds[q]):
        if has_answer[qid]:
            score += f1[qid]
        elif result.best_non_null[qid]:
            score -= 1  # answering an unanswerable question loses its null credit
        if score > best:
            best, threshold = score, result.null_odds[qid]
    return threshold


def at_threshold(result: SquadPredictions, threshold: float) -> dict:
    """Predictions with "no answer" wherever null_odds > threshold (v2.0)."""
    return {q: "" if result.null_odds[q] > threshold else text
            for q, text in result.best_non_null.items()}
