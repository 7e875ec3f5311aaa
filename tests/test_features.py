"""Examples -> features: packing, SQuAD windows and answer alignment, SWAG, NER first-piece
labels with document context, and the cache. Hand-checked tiny cases, then real data
against tf-models-official's copies of the original code (slow)."""

import json
import os

import numpy as np
import pytest

from bert_tf.tokenization import BertTokenizer
from glue_suite import features as F
from glue_suite import readers
from glue_suite.readers import InputExample, NerSentence, SwagExample
from glue_suite.squad_readers import load_squad_json, squad_examples
from glue_suite.tasks import get_task
from squad_helpers import first_answers

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "is", "big", "yes",
         "john", "smith", "(", "1895", "-", "1943", ")", ".", "was", "a", "man", "when",
         "born", "?", "runs", "sees", "##s", "in", "paris", "she", "walks"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return BertTokenizer(str(path), lower_case=True)


def ids(*tokens):
    return [VOCAB.index(t) for t in tokens]


def decode(row):
    return [VOCAB[i] for i in row if i]


# ---------------------------------------------------------------------------------------
# GLUE and SWAG
# ---------------------------------------------------------------------------------------

def test_feature_settings_take_the_flags_then_the_tasks_defaults():
    squad, rte = get_task("squad1.1").hparams, get_task("rte").hparams
    assert F.FeatureSettings.for_task(squad) == F.FeatureSettings(384, 128, 64)
    assert F.FeatureSettings.for_task(squad, max_seq_length=256, doc_stride=64) == \
        F.FeatureSettings(256, 64, 64)
    # A task without SQuAD's window settings gets the class's.
    assert F.FeatureSettings.for_task(rte) == F.FeatureSettings(128, 128, 64)
    assert F.FeatureSettings.for_task(rte, max_query_length=32).max_query_length == 32


def test_pairs_and_single_sentences_are_packed_as_the_original(tokenizer):
    pair = [InputExample("0", "The dog is big.", "Yes", "entailment"),
            InputExample("1", "the dog is the dog is the dog", "john smith was a man",
                         "not_entailment")]
    features = F.sentence_features("rte", pair, tokenizer, F.FeatureSettings(12), True)
    assert decode(features["input_ids"][0]) == [
        "[CLS]", "the", "dog", "is", "big", ".", "[SEP]", "yes", "[SEP]"]
    assert features["segment_ids"][0].tolist() == [0] * 7 + [1, 1] + [0] * 3
    assert features["input_mask"][0].tolist() == [1] * 9 + [0] * 3
    # 8 + 5 tokens into 9: the longer side loses tokens until 5 + 4 (ties drop from B).
    assert decode(features["input_ids"][1]) == [
        "[CLS]", "the", "dog", "is", "the", "dog", "[SEP]", "john", "smith", "was", "a",
        "[SEP]"]
    assert features["labels"].tolist() == [0, 1] and features["labels"].dtype == np.int32

    single = F.sentence_features("sst2", [InputExample("0", "she walks", None, "1")],
                                 tokenizer, F.FeatureSettings(6), True)
    assert decode(single["input_ids"][0]) == ["[CLS]", "she", "walks", "[SEP]"]
    assert single["segment_ids"].sum() == 0
    stsb = F.sentence_features("stsb", [InputExample("0", "a", "b", 3.8)], tokenizer,
                               F.FeatureSettings(6), True)
    assert stsb["labels"].dtype == np.float32 and stsb["labels"][0] == pytest.approx(3.8)
    test = F.sentence_features("rte", [InputExample("0", "a", "b", None)], tokenizer,
                               F.FeatureSettings(6), labelled=False)
    assert "labels" not in test


def test_swag_is_four_sequences_per_question(tokenizer):
    example = SwagExample("7", "She walks.", "The dog", ("runs", "is big", "sees john", "?"), 2)
    features = F.swag_features("swag", [example], tokenizer, F.FeatureSettings(10), True)
    assert features["input_ids"].shape == (1, 4, 10)
    assert decode(features["input_ids"][0, 1]) == [
        "[CLS]", "she", "walks", ".", "[SEP]", "the", "dog", "is", "big", "[SEP]"]
    assert features["segment_ids"][0, 0].tolist() == [0] * 5 + [1] * 4 + [0]
    assert features["labels"].tolist() == [2]


# ---------------------------------------------------------------------------------------
# SQuAD
# ---------------------------------------------------------------------------------------

def _squad_example(training=True, impossible=False):
    context = "John Smith (1895-1943). was a man"
    qa = {"id": "q1", "question": "When was John born?",
          "answers": [] if impossible else [{"text": "1895",
                                             "answer_start": context.index("1895")}]}
    if impossible:
        qa["is_impossible"] = True
    articles = [{"paragraphs": [{"context": context, "qas": [qa]}]}]
    examples, bad = squad_examples(articles, version_2=impossible, training=training)
    assert bad == 0
    return examples


def test_squad_answer_span_is_improved_to_the_answer_pieces(tokenizer):
    """"(1895-1943)." is one whitespace word of 6 pieces; the answer "1895" is one of them."""
    example, = _squad_example()
    assert (example.start_position, example.end_position) == (2, 2)  # word level
    features = F.squad_features("squad1.1", [example], tokenizer,
                                F.FeatureSettings(32, 128, 64), training=True)
    assert decode(features["input_ids"][0]) == [
        "[CLS]", "when", "was", "john", "born", "?", "[SEP]", "john", "smith", "(", "1895",
        "-", "1943", ")", ".", "was", "a", "man", "[SEP]"]
    assert (features["start_positions"][0], features["end_positions"][0]) == (10, 10)
    assert features["token_to_orig"][0, 7:18].tolist() == [0, 1, 2, 2, 2, 2, 2, 2, 3, 4, 5]
    assert (features["token_to_orig"][0, :7] == -1).all() and features["token_to_orig"][0, 18] == -1
    assert features["token_is_max_context"][0, 7:18].all()
    assert features["token_is_max_context"][0].sum() == 11
    assert features["segment_ids"][0].tolist() == [0] * 7 + [1] * 12 + [0] * 13
    assert F.improve_answer_span(np.array(ids("(", "1895", "-", "1943")), 0, 3,
                                 np.array(ids("1943"))) == (3, 3)
    assert F.improve_answer_span(np.array(ids("the", "dog")), 0, 1, np.array(ids("man"))) == (0, 1)


def test_squad_sliding_windows_and_max_context(tokenizer):
    """11 context pieces, 4 per window, stride 2 (worked out by hand from the original)."""
    spans = F.doc_spans(11, 4, 2)
    assert spans == [(0, 4), (2, 4), (4, 4), (6, 4), (8, 3)]
    assert F.max_context_span(spans, 11).tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]

    example, = _squad_example()
    # Question cut to "when was" (2 pieces): 9 - 2 - 3 = 4 context pieces per window.
    features = F.squad_features("squad1.1", [example], tokenizer, F.FeatureSettings(9, 2, 2),
                                training=True)
    assert features["example_index"].tolist() == [0] * 5
    assert decode(features["input_ids"][1]) == [
        "[CLS]", "when", "was", "[SEP]", "(", "1895", "-", "1943", "[SEP]"]
    # The answer piece 3 lies in windows 0 and 1 (offset 4 = [CLS] + 2 + [SEP]).
    assert features["start_positions"].tolist() == [7, 5, 0, 0, 0]
    assert features["end_positions"].tolist() == [7, 5, 0, 0, 0]
    best = [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    for w, (start, length) in enumerate(spans):
        flags = features["token_is_max_context"][w, 4:4 + length].tolist()
        assert flags == [best[p] == w for p in range(start, start + length)]


def test_squad_impossible_and_evaluation_features(tokenizer):
    example, = _squad_example(impossible=True)
    features = F.squad_features("squad2.0", [example], tokenizer, F.FeatureSettings(9, 2, 2),
                                training=True)
    assert (features["start_positions"] == 0).all() and (features["end_positions"] == 0).all()
    dev = F.squad_features("squad1.1", _squad_example(training=False), tokenizer,
                           F.FeatureSettings(9, 2, 2), training=False)
    assert "start_positions" not in dev and len(dev["input_ids"]) == 5
    with pytest.raises(ValueError, match="no room for the context"):
        F.squad_features("squad1.1", [example], tokenizer, F.FeatureSettings(6, 2, 5), True)


# ---------------------------------------------------------------------------------------
# CoNLL-2003
# ---------------------------------------------------------------------------------------

def _document():
    return [NerSentence(0, ("the", "dog", "runs"), ("O", "O", "O")),
            NerSentence(0, ("John", "sees", "dogs"), ("B-PER", "O", "B-ORG")),
            NerSentence(0, ("in", "Paris"), ("O", "B-LOC")),
            NerSentence(1, ("she", "walks"), ("O", "O"))]


def test_ner_labels_on_first_pieces_with_document_context(tokenizer):
    labels = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
    features = F.ner_features("conll2003", _document(), tokenizer, F.FeatureSettings(8))
    assert features["sentence_index"].tolist() == [0, 1, 2, 3]
    # Sentence 1 (4 pieces) centred in 6 pieces of its document: one on each side.
    assert decode(features["input_ids"][1]) == [
        "[CLS]", "runs", "john", "sees", "dog", "##s", "in", "[SEP]"]
    assert features["label_weights"][1].tolist() == [0, 0, 1, 1, 1, 0, 0, 0]  # not "##s"
    assert features["labels"][1, 2:5].tolist() == [labels.index("B-PER"), 0,
                                                   labels.index("B-ORG")]
    assert features["word_index"][1].tolist() == [-1, -1, 0, 1, 2, -1, -1, -1]
    # The sentence's own pieces, "##s" included; its context and [CLS]/[SEP] are not.
    assert features["sentence_mask"][1].tolist() == [0, 0, 1, 1, 1, 1, 0, 0]
    # At the document's start and end the window shifts to stay full.
    assert decode(features["input_ids"][0]) == [
        "[CLS]", "the", "dog", "runs", "john", "sees", "dog", "[SEP]"]
    assert decode(features["input_ids"][2]) == [
        "[CLS]", "john", "sees", "dog", "##s", "in", "paris", "[SEP]"]
    assert features["word_index"][2].tolist() == [-1] * 5 + [0, 1, -1]
    assert features["sentence_mask"][2].tolist() == [0] * 5 + [1, 1, 0]
    # The next document is not context: "she walks" stands alone.
    assert decode(features["input_ids"][3]) == ["[CLS]", "she", "walks", "[SEP]"]


def test_ner_sentence_longer_than_a_window_is_split(tokenizer):
    features = F.ner_features("conll2003", _document()[1:2], tokenizer, F.FeatureSettings(5))
    assert [decode(row) for row in features["input_ids"]] == [
        ["[CLS]", "john", "sees", "dog", "[SEP]"], ["[CLS]", "##s", "[SEP]"]]
    assert features["label_weights"].sum() == 3  # every word labelled exactly once
    assert features["word_index"][0].tolist() == [-1, 0, 1, 2, -1]
    assert features["sentence_mask"].tolist() == [[0, 1, 1, 1, 0], [0, 1, 0, 0, 0]]


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------

def test_cache_hit_second_time_and_miss_on_any_change(tokenizer, tmp_path):
    examples = [InputExample(str(i), "the dog is big", "yes", "entailment") for i in range(5)]

    def load(examples, settings=F.FeatureSettings(16), vocab_sha="abc"):
        return F.load_or_convert("rte", "train", examples, tokenizer, vocab_sha, settings,
                                 labelled=True, training=True, cache_dir=str(tmp_path))

    first, stats = load(examples)
    assert not stats["cached"] and os.path.exists(stats["cache_file"])
    assert stats["examples"] == 5 and stats["examples_per_second"] > 0
    second, stats2 = load(examples)
    assert stats2["cached"] and stats2["cache_file"] == stats["cache_file"]
    assert first.keys() == second.keys()
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    changed = [InputExample("0", "the dog is big", "yes", "not_entailment"), *examples[1:]]
    for _, other in (load(changed), load(examples, F.FeatureSettings(20)),
                     load(examples, vocab_sha="def")):
        assert not other["cached"] and other["cache_file"] != stats["cache_file"]
    files = os.listdir(tmp_path)
    assert len(files) == 4 and all(n.endswith(".npz") for n in files)


# ---------------------------------------------------------------------------------------
# Real data against tf-models-official's copies of google-research/bert (slow)
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_vocab(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


@pytest.mark.slow
@pytest.mark.parametrize("task,training", [("squad2.0", True), ("squad1.1", False)])
def test_squad_features_match_tf_models_official(data_dir, real_vocab, tmp_path, task,
                                                 training):
    from official.nlp.data import squad_lib
    from official.nlp.tools import tokenization as reference_tokenization
    version_2 = task == "squad2.0"
    articles = load_squad_json(readers.data_path(task, "dev", data_dir))["data"][:3]
    if training:
        articles = first_answers(articles)
    examples, _ = squad_examples(articles, version_2=version_2, training=training)
    # Short windows so that most questions get several and max-context matters.
    ours = F.squad_features(task, examples, BertTokenizer(real_vocab, True),
                            F.FeatureSettings(128, 32, 24), training=training)

    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": "x", "data": articles}))
    reference = []
    squad_lib.convert_examples_to_features(
        squad_lib.read_squad_examples(str(path), training, version_2),
        reference_tokenization.FullTokenizer(real_vocab, True), 128, 32, 24, training,
        lambda feature, is_padding=False: reference.append(feature), batch_size=1)
    assert len(ours["input_ids"]) == len(reference) > len(examples)
    for f, ref in enumerate(reference):
        assert ours["input_ids"][f].tolist() == ref.input_ids
        assert ours["segment_ids"][f].tolist() == ref.segment_ids
        assert ours["example_index"][f] == ref.example_index
        to_orig = {t: int(o) for t, o in enumerate(ours["token_to_orig"][f]) if o >= 0}
        assert to_orig == ref.token_to_orig_map
        assert {t: bool(ours["token_is_max_context"][f, t]) for t in to_orig} == \
            ref.token_is_max_context
        if training:
            assert (ours["start_positions"][f], ours["end_positions"][f]) == (
                ref.start_position, ref.end_position)


@pytest.mark.slow
def test_glue_features_match_tf_models_official(data_dir, real_vocab):
    from official.nlp.data import classifier_data_lib
    from official.nlp.tools import tokenization as reference_tokenization
    examples, _ = readers.read_examples("rte", "dev", data_dir)
    ours = F.sentence_features("rte", examples, BertTokenizer(real_vocab, True),
                               F.FeatureSettings(128), True)
    tokenizer = reference_tokenization.FullTokenizer(real_vocab, True)
    labels = ["entailment", "not_entailment"]
    for i, example in enumerate(examples):
        ref = classifier_data_lib.convert_single_example(
            10, classifier_data_lib.InputExample(example.guid, example.text_a, example.text_b,
                                                 example.label), labels, 128, tokenizer)
        assert ours["input_ids"][i].tolist() == ref.input_ids
        assert ours["segment_ids"][i].tolist() == ref.segment_ids
        assert ours["labels"][i] == ref.label_id


@pytest.mark.slow
def test_featurization_throughput_on_real_files(data_dir, real_vocab, tmp_path):
    """Featurization is never the slow part: SQuAD v1.1 dev at 384 tokens, all 10,570
    questions, and CoNLL-2003 dev with document context."""
    tokenizer = BertTokenizer(real_vocab, True)
    for task, settings in (("squad1.1", F.FeatureSettings(384, 128, 64)),
                           ("conll2003", F.FeatureSettings(128))):
        examples, _ = readers.read_examples(task, "dev", data_dir)
        _, stats = F.load_or_convert(task, "dev", examples, tokenizer, "x", settings,
                                     labelled=True, training=False, cache_dir=str(tmp_path))
        print(task, stats)
        assert stats["examples_per_second"] > 200  # minutes of training per second of this
