"""SQuAD post-processing: text recovery, n-best, the v2.0 null score and threshold, the
round trip gold positions -> logits -> answer text, and tf-models-official's
`postprocess_output` (a copy of google-research/bert's `write_predictions`) as reference."""

import collections
import json
import math
import os

import numpy as np
import pytest

from bert_tf.tokenization import BertTokenizer
from glue_suite import features as F
from glue_suite import readers, squad_eval, squad_readers
from glue_suite import squad_postprocess as P
from glue_suite.predictions import write_squad
from squad_helpers import first_answers

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "is", "big", "john",
         "smith", "'", "s", "house", "?", "where", "who", "lives", "in", "paris", "."]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return BertTokenizer(str(path), lower_case=True)


@pytest.mark.parametrize("pred,orig,lower,expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),  # the original's example
    ("cafe", "Café,", True, "Café"),                        # accents stripped by the tokenizer
    ("1895", "(1895-1943).", True, "1895"),
    ("Paris", "Paris.", False, "Paris"),
    ("london", "Paris.", True, "Paris."),                    # no alignment: whole text back
])
def test_get_final_text(pred, orig, lower, expected):
    assert P.get_final_text(pred, orig, lower) == expected


def test_basic_tokenizer_matches_the_original():
    from official.nlp.tools.tokenization import BasicTokenizer
    texts = ["Hello, World!", "Café au lait — naïve façade", "U.S.A. (1895-1943).",
             "中文字符 mixed 漢字", "soft\u00adhyphen and\u200bzero width", "tab\tnew\nline",
             "$5.00 ^caret `tick`", "ÀÉÎÕÜ ß ﬁ", "Ωμέγα ΣΊΣΥΦΟΣ"]
    for lower in (True, False):
        reference = BasicTokenizer(do_lower_case=lower)
        for text in texts:
            assert P.basic_tokenize(text, lower) == reference.tokenize(text), text


def _example(tokenizer, version_2):
    context = "John Smith's house is big."
    qas = [{"id": "a", "question": "who lives in paris?",
            "answers": [{"text": "John Smith", "answer_start": 0}]}]
    articles = [{"paragraphs": [{"context": context, "qas": qas}]}]
    examples, _ = squad_readers.squad_examples(articles, version_2=version_2, training=False)
    features = F.squad_features("squad2.0", examples, tokenizer,
                                F.FeatureSettings(24, 128, 64), training=False)
    return examples, features


def test_nbest_text_recovery_and_null_odds(tokenizer):
    examples, features = _example(tokenizer, version_2=True)
    tokens = [VOCAB[i] for i in features["input_ids"][0]]
    # [CLS] who lives in paris ? [SEP] john smith ' s house is big . [SEP]
    start, end = np.full((1, 24), -10.0), np.full((1, 24), -10.0)
    john, smith = tokens.index("john"), tokens.index("smith")
    start[0, john], end[0, smith] = 4.0, 3.0      # best span: "John Smith" (score 7)
    start[0, 0], end[0, 0] = 2.0, 1.0             # null score 3
    end[0, tokens.index("s")] = 2.5               # "John Smith's" (score 6.5)
    result = P.postprocess(examples, features, start, end, VOCAB, True, version_2=True)
    texts = [e["text"] for e in result.nbest["a"]]
    assert texts[:2] == ["John Smith", "John Smith's"]  # text cut from the paragraph
    assert "" in texts and texts.index("") > 1
    assert sum(e["probability"] for e in result.nbest["a"]) == pytest.approx(1.0)
    assert result.null_odds["a"] == pytest.approx(3.0 - 7.0)
    assert result.predictions["a"] == "John Smith"
    # Above the threshold the null answer wins; the best non-null answer is kept.
    strict = P.postprocess(examples, features, start, end, VOCAB, True, version_2=True,
                           null_score_diff_threshold=-5.0)
    assert strict.predictions["a"] == "" and strict.best_non_null["a"] == "John Smith"
    assert P.at_threshold(strict, -5.0) == {"a": ""} and P.at_threshold(strict, -3.0) == {
        "a": "John Smith"}
    # Too long answers and spans whose start is in the question are never candidates.
    short = P.postprocess(examples, features, start, end, VOCAB, True, version_2=False,
                          max_answer_length=1)
    assert short.predictions["a"] not in ("John Smith", "John Smith's")
    assert not short.null_odds


def test_v2_scores_equal_the_official_script_on_the_written_files(tokenizer, tmp_path):
    """score() searches thresholds on the best non-null answers; at the threshold its
    numbers equal scoring predictions.json, and the best threshold's file scores best_f1."""
    rng = np.random.default_rng(0)
    context = "the dog is big . john smith ' s house is in paris ."
    qas = [{"id": str(i), "question": "who lives in paris ?",
            "answers": [] if i % 3 == 0 else [{"text": w, "answer_start": context.index(w)}],
            "is_impossible": i % 3 == 0} for i, w in enumerate(
                ["dog", "john smith", "paris", "house", "big", "dog", "smith", "paris"])]
    articles = [{"paragraphs": [{"context": context, "qas": qas}]}]
    examples, _ = squad_readers.squad_examples(articles, version_2=True, training=False)
    features = F.squad_features("squad2.0", examples, tokenizer,
                                F.FeatureSettings(32, 128, 64), training=False)
    start, end = rng.normal(size=(2, len(examples), 32)) * 3
    result = P.postprocess(examples, features, start, end, VOCAB, True, version_2=True)
    scores = P.score(examples, result, version_2=True)
    threshold = P.best_f1_threshold(examples, result)
    paths = write_squad(str(tmp_path), result, True, threshold)
    assert sorted(os.path.basename(p) for p in paths) == [
        "best_non_null_predictions.json", "nbest_predictions.json", "null_odds.json",
        "predictions.json", "predictions_best_threshold.json"]
    # Every question gets its best span there; it agrees with predictions.json wherever
    # that one answers.
    answer_all = json.loads((tmp_path / "best_non_null_predictions.json").read_text())
    assert set(answer_all) == set(result.predictions)
    assert all(answer_all[q] == text for q, text in result.predictions.items() if text)
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    official = squad_eval.evaluate_v2(articles, predictions)
    for key in ("exact", "f1", "HasAns_f1", "NoAns_f1"):
        assert scores[key] == pytest.approx(official[key])
    best = json.loads((tmp_path / "predictions_best_threshold.json").read_text())
    assert squad_eval.evaluate_v2(articles, best)["f1"] == pytest.approx(scores["best_f1"])
    assert scores["best_f1"] >= scores["f1"]
    if math.isfinite(threshold):  # the official threshold, unless answering nothing is best
        assert threshold == scores["best_f1_thresh"]


def test_best_threshold_when_answering_nothing_is_best():
    """The official search reports threshold 0.0 when nulling every question is best (its
    starting value); on score differences that would still answer odds <= 0, so the
    threshold to apply is -inf."""
    qas = [{"id": q, "question": "?", "answers": [], "is_impossible": True} for q in "abc"]
    articles = [{"paragraphs": [{"context": "the dog", "qas": qas}]}]
    examples, _ = squad_readers.squad_examples(articles, version_2=True, training=False)
    result = P.SquadPredictions({}, {}, {q: "dog" for q in "abc"},
                                {"a": -1.0, "b": 2.0, "c": 0.5})
    scores = P.score(examples, result, version_2=True)
    assert scores["best_f1"] == 100.0 and scores["best_f1_thresh"] == 0.0
    assert P.best_f1_threshold(examples, result) == -math.inf
    assert P.at_threshold(result, -math.inf) == {"a": "", "b": "", "c": ""}


# ---------------------------------------------------------------------------------------
# Real dev files (slow)
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_tokenizer(minilm_dir):
    return BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), True)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["squad1.1", "squad2.0"])
def test_gold_positions_round_trip_to_the_gold_answer(data_dir, real_tokenizer, task):
    """Features with gold start/end -> one-hot logits -> postprocess gives back the gold
    answer text, cut from the original paragraph (unanswerable ones -> "").

    Not 100%, as in the original: an answer that starts or ends inside a WordPiece
    (gold "gold" of "golden", "27,814" of "€27,814") comes back as the whole piece.
    """
    version_2 = task == "squad2.0"
    articles = first_answers(
        squad_readers.load_squad_json(readers.data_path(task, "dev", data_dir))["data"][:8])
    examples, _ = squad_readers.squad_examples(articles, version_2=version_2, training=True)
    features = F.squad_features(task, examples, real_tokenizer,
                                F.FeatureSettings(384, 128, 64), training=True)
    start = np.zeros(features["input_ids"].shape, np.float32)
    end = np.zeros_like(start)
    rows = np.arange(len(start))
    start[rows, features["start_positions"]] += 10.0  # 0 = [CLS] when not in the window
    end[rows, features["end_positions"]] += 10.0
    result = P.postprocess(examples, features, start, end, real_tokenizer.vocab, True,
                           version_2=version_2)
    exact = [e.orig_answer_text == result.predictions[e.qas_id] for e in examples]
    normalised = [squad_eval.exact_match(result.predictions[e.qas_id], e.orig_answer_text)
                  for e in examples]
    print(f"{task}: {len(examples)} questions, exact text {np.mean(exact):.4f}, "
          f"normalised {np.mean(normalised):.4f}")
    assert np.mean(exact) > 0.97 and np.mean(normalised) > 0.99
    if version_2:
        impossible = [e for e in examples if e.is_impossible]
        assert impossible and all(result.predictions[e.qas_id] == "" for e in impossible)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["squad1.1", "squad2.0"])
def test_postprocess_matches_tf_models_official(data_dir, real_tokenizer, minilm_dir,
                                                tmp_path, task):
    """Random logits on short windows: same predictions, n-best texts, probabilities and
    null odds as the reference."""
    from official.nlp.data import squad_lib
    from official.nlp.tools.tokenization import FullTokenizer
    version_2 = task == "squad2.0"
    articles = squad_readers.load_squad_json(readers.data_path(task, "dev", data_dir))["data"][:1]
    examples, _ = squad_readers.squad_examples(articles, version_2=version_2, training=False)
    ours = F.squad_features(task, examples, real_tokenizer, F.FeatureSettings(128, 32, 24),
                            training=False)
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "x", "data": articles}))
    ref_examples = squad_lib.read_squad_examples(str(path), False, version_2)
    ref_features = []
    squad_lib.convert_examples_to_features(
        ref_examples, FullTokenizer(os.path.join(minilm_dir, "vocab.txt"), True), 128, 32,
        24, False, lambda f, is_padding=False: ref_features.append(f), batch_size=1)
    rng = np.random.default_rng(0)
    start, end = rng.normal(size=(2, len(ref_features), 128)).astype(np.float32)
    start[:, 0] += 2.0  # make the null answer competitive
    end[:, 0] += 2.0
    Result = collections.namedtuple("Result", "unique_id start_logits end_logits")
    results = [Result(f.unique_id, start[i].tolist(), end[i].tolist())
               for i, f in enumerate(ref_features)]
    ref_predictions, ref_nbest, ref_odds = squad_lib.postprocess_output(
        ref_examples, ref_features, results, 20, 30, True, version_2, 0.0)
    result = P.postprocess(examples, ours, start, end, real_tokenizer.vocab, True,
                           version_2=version_2)
    assert result.predictions == dict(ref_predictions)
    for qid, entries in ref_nbest.items():
        assert [e["text"] for e in result.nbest[qid]] == [e["text"] for e in entries]
        np.testing.assert_allclose([e["probability"] for e in result.nbest[qid]],
                                   [e["probability"] for e in entries], rtol=1e-5)
    if version_2:
        assert sum(1 for p in result.predictions.values() if p == "") > 0
        np.testing.assert_allclose([result.null_odds[q] for q in ref_odds],
                                   list(ref_odds.values()), rtol=1e-5, atol=1e-5)
