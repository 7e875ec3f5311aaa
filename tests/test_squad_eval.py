"""SQuAD scorers against the official scripts' copies in tf-models-official."""

import json

import numpy as np
import pytest

from glue_suite import squad_eval


def _dataset(*qas):
    return [{"paragraphs": [{"context": "unused", "qas": list(qas)}]}]


def _qa(qid, *answers):
    return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0}
                                                    for a in answers]}


def test_normalize_answer():
    assert squad_eval.normalize_answer("The  Cat's (hat)!") == "cats hat"
    assert squad_eval.normalize_answer("an apple, a pear and THE end") == "apple pear and end"
    assert squad_eval.normalize_answer("theory") == "theory"  # whole words only
    # Only ASCII punctuation goes.
    assert squad_eval.normalize_answer("Café—“quoted”") == "café—“quoted”"


def test_v1_hand_worked():
    dataset = _dataset(_qa("a", "the Eiffel Tower", "Eiffel"), _qa("b", "1889"),
                       _qa("c", "Paris France"))
    predictions = {"a": "Eiffel tower.", "b": "in 1889 , yes", "c": ""}
    # a: exact (after normalisation). b: F1 = 2 * (1/3 * 1) / (1/3 + 1) = 0.5.
    # c: empty prediction scores 0.
    result = squad_eval.evaluate_v1(dataset, predictions)
    assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(50.0)}
    # A missing prediction scores 0 and still counts.
    assert squad_eval.evaluate_v1(dataset, {"a": "Eiffel"}) == {
        "exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 / 3)}


def test_v2_hand_worked():
    dataset = _dataset(_qa("a", "1889"), _qa("b"), _qa("c"), _qa("d", "x y"))
    predictions = {"a": "1889", "b": "", "c": "something", "d": "x"}
    na_probs = {"a": 0.1, "b": 0.9, "c": 0.3, "d": 0.5}
    result = squad_eval.evaluate_v2(dataset, predictions, na_probs)
    assert result["exact"] == 50.0 and result["f1"] == pytest.approx(100 * (1 + 1 + 0 + 2 / 3) / 4)
    assert (result["HasAns_total"], result["NoAns_total"], result["total"]) == (2, 2, 4)
    assert result["NoAns_exact"] == 50.0 and result["HasAns_exact"] == 50.0
    # Threshold search, in increasing na_prob: start at 2 (all null: b, c right),
    # a +1 -> 3, c -1 -> 2, d +0 (EM) -> 2, b +0 -> 2: best EM 3/4 at threshold 0.1.
    assert (result["best_exact"], result["best_exact_thresh"]) == (75.0, 0.1)
    # na_prob above the threshold turns a prediction into "no answer".
    forced = squad_eval.evaluate_v2(dataset, predictions, {**na_probs, "c": 1.5})
    assert forced["NoAns_exact"] == 100.0
    with pytest.raises(ValueError, match="1 of 4 questions have no prediction"):
        squad_eval.evaluate_v2(dataset, {"a": "", "b": "", "c": ""})
    subset = squad_eval.select_questions(dataset, ["a", "b"])
    assert squad_eval.evaluate_v2(subset, predictions)["exact"] == 100.0
    assert "best_f1" not in squad_eval.evaluate_v2(dataset, predictions)


def _perturbed_predictions(dataset, rng, fraction=0.5):
    """Gold answers with a random `fraction` corrupted: truncated, swapped with another
    question's answer, emptied, or re-cased/re-punctuated (still correct)."""
    questions = [qa for article in dataset for p in article["paragraphs"] for qa in p["qas"]]
    pool = [a["text"] for qa in questions for a in qa["answers"] + qa.get(
        "plausible_answers", [])]
    predictions = {}
    for qa in questions:
        answers = [a["text"] for a in qa["answers"]] or [
            a["text"] for a in qa.get("plausible_answers", [])] or [""]
        text = answers[rng.integers(len(answers))] if rng.random() < 0.9 else ""
        if qa["answers"] == [] and rng.random() < 0.5:
            text = ""  # correctly abstain on half the unanswerable questions
        if rng.random() < fraction:
            kind = rng.integers(4)
            words = text.split()
            if kind == 0 and words:
                text = " ".join(words[: max(1, len(words) - 1)] if rng.random() < 0.5
                                else words[1:])
            elif kind == 1:
                text = pool[rng.integers(len(pool))]
            elif kind == 2:
                text = ""
            else:
                text = "The " + text.upper() + " ."
        predictions[qa["id"]] = text
    return predictions


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_v1_matches_official_on_real_dev(data_dir, seed):
    official = pytest.importorskip("official.nlp.tools.squad_evaluate_v1_1")
    with open(f"{data_dir}/squad/v1.1/dev-v1.1.json") as f:
        dataset = json.load(f)["data"]
    predictions = _perturbed_predictions(dataset, np.random.default_rng(seed))
    ours = squad_eval.evaluate_v1(dataset, predictions)
    theirs = official.evaluate(dataset, predictions)  # fractions, keys exact_match/final_f1
    assert 30 < ours["exact_match"] < 90 and ours["f1"] > ours["exact_match"]
    assert abs(ours["exact_match"] - 100 * theirs["exact_match"]) < 1e-9
    assert abs(ours["f1"] - 100 * theirs["final_f1"]) < 1e-9
    assert squad_eval.evaluate_v1(dataset, {qa["id"]: qa["answers"][0]["text"] for a in dataset
                                            for p in a["paragraphs"] for qa in p["qas"]}) == {
        "exact_match": 100.0, "f1": 100.0}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_v2_matches_official_on_real_dev(data_dir, seed):
    official = pytest.importorskip("official.nlp.tools.squad_evaluate_v2_0")
    with open(f"{data_dir}/squad/v2.0/dev-v2.0.json") as f:
        dataset = json.load(f)["data"]
    rng = np.random.default_rng(seed)
    predictions = _perturbed_predictions(dataset, rng)
    # Null-odds-like scores: some above the default threshold 1.0; seed 1 rounds them
    # to force ties in the threshold search.
    na_probs = {qid: float(v) for qid, v in zip(predictions, rng.normal(0, 1.5, len(predictions)))}
    if seed == 1:
        na_probs = {qid: round(v, 1) for qid, v in na_probs.items()}
    ours = squad_eval.evaluate_v2(dataset, predictions, na_probs)
    theirs = official.evaluate(dataset, predictions, na_probs)
    renamed = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
               "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}
    theirs = {renamed.get(k, k): v for k, v in theirs.items() if not k.startswith("pr_")}
    assert set(ours) == set(theirs)
    for key in ours:
        assert abs(ours[key] - theirs[key]) < 1e-9, key
    assert ours["total"] == 11873 and ours["HasAns_total"] == 5928
    # Without na_probs: the official script's threshold-free scores.
    ours = squad_eval.evaluate_v2(dataset, predictions)
    theirs = official.evaluate(dataset, predictions)
    for key in ours:
        assert abs(ours[key] - theirs[key]) < 1e-9, key
