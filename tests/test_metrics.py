"""Metrics against scikit-learn, scipy and seqeval (an independent conlleval port)."""

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from glue_suite import metrics, readers
from glue_suite.metrics import compute_metrics, entity_f1, is_degenerate


def _classification_cases():
    rng = np.random.default_rng(0)
    for n in (1, 7, 408, 5000):
        labels = rng.integers(0, 2, n)
        yield labels, rng.integers(0, 2, n)                     # random
        yield labels, np.where(rng.random(n) < 0.8, labels, 1 - labels)  # a decent model
        yield labels, np.ones(n, int)                            # degenerate
        yield labels, np.zeros(n, int)                           # degenerate, no positive


@pytest.mark.parametrize("case", range(16))
def test_classification_metrics_match_sklearn(case):
    labels, predictions = list(_classification_cases())[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns on zero division / constant input
        expected_f1 = skm.f1_score(labels, predictions, zero_division=0)
        expected_mcc = skm.matthews_corrcoef(labels, predictions)
    assert metrics.accuracy(predictions, labels) == pytest.approx(
        100 * skm.accuracy_score(labels, predictions), abs=1e-10)
    assert metrics.binary_f1(predictions, labels) == pytest.approx(100 * expected_f1, abs=1e-10)
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
        100 * expected_mcc, abs=1e-10)


def test_multiclass_mcc_and_accuracy_match_sklearn():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 9815)
    predictions = np.where(rng.random(9815) < 0.7, labels, rng.integers(0, 3, 9815))
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
        100 * skm.matthews_corrcoef(labels, predictions), abs=1e-10)
    assert compute_metrics("mnli", predictions, labels) == {
        "accuracy": pytest.approx(100 * skm.accuracy_score(labels, predictions), abs=1e-10)}


@pytest.mark.parametrize("seed", range(4))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    # STS-B-like: gold scores on a 0.2 grid (many ties), noisy predictions; and rounded
    # predictions to force ties on both sides.
    labels = np.round(rng.uniform(0, 5, 1500) * 5) / 5
    predictions = labels + rng.normal(0, 1.0 + seed, 1500)
    if seed % 2:
        predictions = np.round(predictions)
    result = compute_metrics("stsb", predictions, labels)
    assert result["pearson"] == pytest.approx(100 * stats.pearsonr(predictions, labels)[0],
                                              abs=1e-9)
    assert result["spearman"] == pytest.approx(
        100 * stats.spearmanr(predictions, labels)[0], abs=1e-9)


def test_constant_regression_predictions():
    labels = np.array([0.0, 1.0, 2.5, 5.0])
    result = compute_metrics("stsb", np.full(4, 2.5), labels)
    assert np.isnan(result["pearson"]) and np.isnan(result["spearman"])  # as scipy
    assert is_degenerate(np.full(4, 2.5)) and is_degenerate(np.array([2.5, 2.5 + 1e-9]))
    assert not is_degenerate(labels)


def test_mrpc_majority_baseline_is_flagged():
    # MRPC dev: 279 paraphrases of 408; predicting "1" always gives accuracy 68.4.
    labels = np.array([1] * 279 + [0] * 129)
    predictions = np.ones(408, int)
    result = compute_metrics("mrpc", predictions, labels)
    assert round(result["accuracy"], 1) == 68.4
    assert result["f1"] == pytest.approx(100 * skm.f1_score(labels, predictions))
    assert compute_metrics("cola", predictions, labels) == {"mcc": 0.0}
    assert is_degenerate(predictions) and not is_degenerate(labels)
    assert is_degenerate(np.array(["O", "O"])) and not is_degenerate(np.array(["O", "B-PER"]))


def test_compute_metrics_keys_and_errors():
    labels = np.array([0, 1, 1, 0])
    assert set(compute_metrics("qqp", labels, labels)) == {"f1", "accuracy"}
    assert compute_metrics("swag", [0, 3, 2], [0, 3, 1])["accuracy"] == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="squad_eval"):
        compute_metrics("squad1.1", labels, labels)
    with pytest.raises(ValueError, match="equal-length"):
        compute_metrics("rte", labels[:3], labels)


# ---------------------------------------------------------------------------------------
# Entity F1
# ---------------------------------------------------------------------------------------

def test_entity_f1_hand_worked():
    # Gold (IOB1): "Peter Blackburn" PER, "Smith" PER (B- separates the two), "EU" ORG.
    gold = [["I-PER", "I-PER", "B-PER", "O", "I-ORG"], ["O", "I-LOC"]]
    # Predicted (BIO-style): PER 0-1 correct; PER 2 typed as ORG (wrong); ORG 4 correct;
    # an I-MISC after O in sentence 2 starts an entity (conlleval), LOC 1 missed.
    pred = [["B-PER", "I-PER", "I-ORG", "O", "B-ORG"], ["I-MISC", "O"]]
    # gold entities 4, predicted 4, correct 2 -> P = R = F1 = 50.
    result = entity_f1(gold, pred, scheme="iob1")
    assert result == {"precision": 50.0, "recall": 50.0, "f1": 50.0, "num_gold": 4,
                      "num_pred": 4, "num_correct": 2}
    # The same gold in BIO scores the same; I-ORG right after I-PER is a new entity.
    result = entity_f1([readers.to_bio(s) for s in gold], pred, scheme="bio")
    assert result["f1"] == 50.0
    assert metrics.chunks(["I-PER", "I-PER", "B-PER", "I-ORG", "O", "B-LOC", "I-LOC"]) == {
        (0, 1, "PER"), (2, 2, "PER"), (3, 3, "ORG"), (5, 6, "LOC")}
    # Entities do not cross sentences, and a chunk at the sentence end is closed.
    assert entity_f1([["I-PER"], ["I-PER"]], [["I-PER"], ["I-PER"]], "iob1")["num_gold"] == 2


def test_entity_f1_checks_the_gold_scheme():
    with pytest.raises(ValueError, match="not BIO"):
        entity_f1([["O", "I-PER"]], [["O", "I-PER"]], scheme="bio")
    with pytest.raises(ValueError, match="not IOB1"):
        entity_f1([["O", "B-PER"]], [["O", "B-PER"]], scheme="iob1")
    with pytest.raises(ValueError, match="not O, B-TYPE or I-TYPE"):
        entity_f1([["O"]], [["S-PER"]])
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags, 1 predicted"):
        entity_f1([["O", "O"]], [["O"]])


_TAGS = ["O"] * 4 + [p + t for p in ("B-", "I-") for t in ("PER", "ORG", "LOC", "MISC")]


def _tag_soup(rng, n):
    """Arbitrary B/I/O sequences: conlleval decodes any of them."""
    return [[_TAGS[i] for i in rng.integers(0, len(_TAGS), rng.integers(1, 15))]
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_entity_f1_matches_seqeval(seed):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    rng = np.random.default_rng(seed)
    gold = [readers.to_bio(s) for s in _tag_soup(rng, 300)]  # valid BIO gold
    pred = [[t if rng.random() < 0.6 else rng.choice(_TAGS) for t in s] for s in gold]
    ours = entity_f1(gold, pred, scheme="bio")
    assert ours["num_gold"] > 500 and 0 < ours["num_correct"] < ours["num_pred"]
    for key, fn in (("precision", seqeval_metrics.precision_score),
                    ("recall", seqeval_metrics.recall_score), ("f1", seqeval_metrics.f1_score)):
        assert ours[key] == pytest.approx(100 * fn(gold, pred), abs=1e-9)
    # The raw soup decoded as chunks agrees with seqeval's entity extraction too.
    soup = _tag_soup(rng, 100)
    for tags in soup:
        expected = {(b, e, t) for t, b, e in seqeval_get_entities(tags)}
        assert metrics.chunks(tags) == expected


def seqeval_get_entities(tags):
    from seqeval.metrics.sequence_labeling import get_entities
    return get_entities(list(tags))


@pytest.mark.slow
def test_entity_f1_on_conll_test_matches_seqeval(data_dir):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    iob1 = [list(s.tags) for s in readers.read_file(
        "conll2003", "test", f"{data_dir}/conll2003/eng.testb")[0]]  # converted to BIO
    raw_iob1 = []  # the file's own IOB1 tags
    sentence = []
    for line in open(f"{data_dir}/conll2003/eng.testb", encoding="utf-8"):
        fields = line.split()
        if (not fields or fields[0] == "-DOCSTART-") and sentence:
            raw_iob1.append(sentence)
            sentence = []
        elif fields and fields[0] != "-DOCSTART-":
            sentence.append(fields[-1])
    # A model-like corruption: swap types, drop and add entities, break B/I prefixes.
    rng = np.random.default_rng(0)
    types = ["PER", "ORG", "LOC", "MISC"]
    pred = []
    for tags in iob1:
        out = []
        for tag in tags:
            r = rng.random()
            if r < 0.05:
                tag = "O"
            elif r < 0.10:
                tag = rng.choice(["B-", "I-"]) + rng.choice(types)
            elif r < 0.15 and tag != "O":
                tag = "I-" + tag[2:]
            out.append(tag)
        pred.append(out)
    ours = entity_f1(iob1, pred, scheme="bio")
    assert ours["num_gold"] == 5648  # eng.testb's entity count (conlleval: 5648 phrases)
    assert entity_f1(raw_iob1, pred, scheme="iob1") == ours  # IOB1 gold scores the same
    assert 50 < ours["f1"] < 95
    for key, fn in (("precision", seqeval_metrics.precision_score),
                    ("recall", seqeval_metrics.recall_score), ("f1", seqeval_metrics.f1_score)):
        assert ours[key] == pytest.approx(100 * fn(iob1, pred), abs=1e-9)
        assert ours[key] == pytest.approx(100 * fn(raw_iob1, pred), abs=1e-9)
    assert compute_metrics("conll2003", pred, iob1) == {
        "ner_f1": ours["f1"], "ner_precision": ours["precision"], "ner_recall": ours["recall"]}
    with pytest.raises(ValueError, match="not BIO"):
        entity_f1(raw_iob1, pred, scheme="bio")
    with pytest.raises(ValueError, match="not IOB1"):
        entity_f1(iob1, pred, scheme="iob1")
