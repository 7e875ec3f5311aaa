"""SQuAD JSON -> SquadExample: google-research/bert's whitespace split and answer
alignment, through `readers.read_examples` on synthetic files, then against
tf-models-official's copy of the original reader on the real data (slow)."""

import gzip
import json
import pathlib

import pytest

from glue_suite import readers
from glue_suite.bad_rows import DataFormatError
from glue_suite.squad_readers import split_context
from squad_helpers import first_answers


def _squad_file(root, relpath, version_2=False, gz=False):
    context = "Sky\u202fis  blue.\nGrass is (green)."
    qas = [{"id": "q1", "question": "What is blue?",
            "answers": [{"text": "Sky", "answer_start": 0}]},
           {"id": "q2", "question": "Grass?",
            "answers": [{"text": "green", "answer_start": 24}]}]
    if version_2:
        qas.append({"id": "q3", "question": "Why?", "answers": [], "is_impossible": True,
                    "plausible_answers": [{"text": "blue", "answer_start": 9}]})
        for qa in qas[:2]:
            qa["is_impossible"] = False
    data = {"version": "2.0" if version_2 else "1.1",
            "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}
    text = json.dumps(data)
    path = pathlib.Path(root) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text)
    return context


def test_squad_whitespace_tokens_and_positions(tmp_path):
    context = _squad_file(tmp_path, "squad/v1.1/train-v1.1.reconstructed.json.gz", gz=True)
    examples, num_bad = readers.read_examples("squad1.1", "train", str(tmp_path))
    assert num_bad == 0
    q1, q2 = examples
    # U+202F separates like a space; "(green)." stays one token.
    assert q1.doc_tokens == ("Sky", "is", "blue.", "Grass", "is", "(green).")
    assert q1.doc_tokens is q2.doc_tokens  # shared per paragraph
    assert len(q1.char_to_word_offset) == len(context)
    assert q1.char_to_word_offset[:8] == (0, 0, 0, 0, 1, 1, 1, 1)
    assert (q1.start_position, q1.end_position, q1.orig_answer_text) == (0, 0, "Sky")
    assert (q2.start_position, q2.end_position, q2.answers) == (5, 5, ("green",))


def _original_split(paragraph_text):
    """google-research/bert run_squad.py's loop, verbatim, as the reference."""
    def is_whitespace(c):
        if c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F:
            return True
        return False
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in paragraph_text:
        if is_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return tuple(doc_tokens), tuple(char_to_word_offset)


@pytest.mark.parametrize("text", ["", " ", "  lead and trail  ", "a\u202fb\u00a0c\u2009d",
                                  "\t\r\nx\n\ny", "émoji 😀 ok", "one"])
def test_split_context_matches_the_original_loop(text):
    assert split_context(text) == _original_split(text)


def test_squad_v2_and_dev(tmp_path):
    _squad_file(tmp_path, "squad/v2.0/train-v2.0.json", version_2=True)
    train, _ = readers.read_examples("squad2.0", "train", str(tmp_path))
    assert [(e.is_impossible, e.start_position, e.orig_answer_text) for e in train] == [
        (False, 0, "Sky"), (False, 5, "green"), (True, -1, "")]
    _squad_file(tmp_path, "squad/v2.0/dev-v2.0.json", version_2=True)
    dev, _ = readers.read_examples("squad2.0", "dev", str(tmp_path))
    assert [(e.is_impossible, e.start_position, e.answers) for e in dev] == [
        (False, None, ("Sky",)), (False, None, ("green",)), (True, None, ())]


def test_squad_bad_answers(tmp_path):
    path = tmp_path / "squad/v1.1/train-v1.1.json"
    path.parent.mkdir(parents=True)
    qa = {"id": "bad", "question": "?", "answers": [{"text": "blue", "answer_start": 99}]}
    lost = {"id": "lost", "question": "?", "answers": [{"text": "BLUE", "answer_start": 7}]}
    kept = {"id": "kept", "question": "?", "answers": [{"text": "ue", "answer_start": 9}]}
    path.write_text(json.dumps({"data": [{"paragraphs": [
        {"context": "Sky is blue.", "qas": [qa, lost, kept]}]}]}))
    with pytest.raises(DataFormatError, match="question 'bad'.*lies outside the context"):
        readers.read_examples("squad1.1", "train", str(tmp_path))
    # The original drops answers whose text is not in their doc tokens ("BLUE" vs
    # "blue."), and keeps those inside a token ("ue" in "blue."); so do we.
    examples, num_bad = readers.read_examples("squad1.1", "train", str(tmp_path),
                                              skip_bad_rows=True)
    assert [(e.qas_id, e.start_position, e.end_position) for e in examples] == [("kept", 2, 2)]
    assert num_bad == 2


# ---------------------------------------------------------------------------------------
# Real data (../shared/data)
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_real_squad_matches_tf_models_reader(data_dir, tmp_path):
    """google-research/bert's reader as shipped in tf-models-official is the reference."""
    squad_lib = pytest.importorskip("official.nlp.data.squad_lib")
    # SQuAD v1.1 train (the reconstructed file; its first 100 of 442 articles, for time),
    # and v2.0 dev turned into training data (first answer of each question) to exercise
    # is_impossible.
    with gzip.open(f"{data_dir}/squad/v1.1/train-v1.1.reconstructed.json.gz", "rt") as f:
        v1 = json.load(f)
    v1["data"] = v1["data"][:100]
    with open(f"{data_dir}/squad/v2.0/dev-v2.0.json") as f:
        v2 = json.load(f)
    first_answers(v2["data"])
    for article in v1["data"] + v2["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            assert split_context(context) == _original_split(context)
    for version_2, data in ((False, v1), (True, v2)):
        path = tmp_path / "train.json"
        path.write_text(json.dumps(data))
        ours, num_bad = readers.read_file("squad2.0" if version_2 else "squad1.1", "train",
                                          str(path))
        theirs = squad_lib.read_squad_examples(str(path), is_training=True,
                                               version_2_with_negative=version_2)
        assert len(ours) + num_bad == sum(
            len(p["qas"]) for a in data["data"] for p in a["paragraphs"])
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert (a.qas_id, a.question_text, list(a.doc_tokens), a.orig_answer_text,
                    a.start_position, a.end_position, a.is_impossible) == (
                b.qas_id, b.question_text, b.doc_tokens, b.orig_answer_text,
                b.start_position, b.end_position, b.is_impossible)
