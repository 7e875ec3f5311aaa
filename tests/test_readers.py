"""Readers: synthetic files in the real layouts, then the real data (slow).
SQuAD's reader has its own module, tests/test_squad_readers.py."""

import collections
import pathlib

import numpy as np
import pytest

from glue_suite import predictions, readers
from glue_suite.data_dir import DEFAULT_DATA_DIR, ENV_VAR, resolve_data_dir
from glue_suite.readers import (DataFormatError, InputExample, MissingDataError,
                                NerSentence, SwagExample)
from glue_suite.tasks import TASKS


def _write(root, relpath, text, bom=False):
    path = pathlib.Path(root) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return str(path)


# ---------------------------------------------------------------------------------------
# Tasks and data dir
# ---------------------------------------------------------------------------------------

def test_task_registry_matches_the_paper():
    for name in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"):
        hp = TASKS[name].hparams
        assert (hp.batch_size, hp.epochs, hp.max_seq_length) == (32, 3, 128)
        assert hp.learning_rates == (5e-5, 4e-5, 3e-5, 2e-5)
    squad1, squad2 = TASKS["squad1.1"].hparams, TASKS["squad2.0"].hparams
    swag = TASKS["swag"].hparams
    assert (squad1.epochs, squad1.learning_rates, squad1.batch_size) == (3, (5e-5,), 32)
    assert (squad1.max_seq_length, squad1.doc_stride, squad1.max_query_length) == (384, 128, 64)
    assert (squad2.epochs, squad2.learning_rates, squad2.batch_size) == (2, (5e-5,), 48)
    assert (swag.epochs, swag.learning_rates, swag.batch_size) == (3, (2e-5,), 16)
    files = {f for spec in TASKS.values() for f in spec.submission_files.values()}
    assert files == {"CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv",
                     "MNLI-mm.tsv", "QNLI.tsv", "RTE.tsv", "WNLI.tsv", "AX.tsv"}
    assert TASKS["cola"].main_metric == "mcc" and TASKS["stsb"].main_metric == "spearman"
    assert TASKS["mrpc"].metrics == ("f1", "accuracy")
    for spec in TASKS.values():  # every split of every task has a place in the layout
        assert set(spec.eval_splits) | set(spec.submission_files) <= set(readers.splits(spec.name))


def test_resolve_data_dir(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_data_dir(None) == DEFAULT_DATA_DIR
    monkeypatch.setenv(ENV_VAR, "/env/dir")
    assert resolve_data_dir(None) == "/env/dir"
    assert resolve_data_dir("/flag/dir") == "/flag/dir"


@pytest.mark.parametrize("task,split,url", [
    ("rte", "dev", "gluebenchmark.com"), ("mnli", "train", "download_glue_data.py"),
    ("squad1.1", "dev", "rajpurkar.github.io/SQuAD-explorer"),
    ("swag", "train", "rowanzellers.com/swag"),
    ("conll2003", "test", "clips.uantwerpen.be/conll2003/ner")])
def test_missing_file_names_file_layout_and_source(tmp_path, task, split, url):
    with pytest.raises(MissingDataError) as error:
        readers.read_examples(task, split, str(tmp_path))
    message = str(error.value)
    assert str(tmp_path) in message and url in message
    assert TASKS[task].files[split][0].path in message  # the expected path
    assert "layout" in message


def test_unknown_split_lists_the_splits(tmp_path):
    with pytest.raises(ValueError, match="dev_matched"):
        readers.read_examples("mnli", "dev", str(tmp_path))


# ---------------------------------------------------------------------------------------
# GLUE TSV
# ---------------------------------------------------------------------------------------

# One labelled and one test file per task in download_glue_data.py's layout:
# (dev header or None, dev rows, test header, test rows, expected dev examples).
_Q = 'He said "hi" , then left .'  # bare quotes: no quote handling in GLUE files
GLUE_FILES = {
    "cola": (None, ["gj04\t1\t\t" + _Q, "gj04\t0\t*\tBad sentence it ."],
             "index\tsentence", ["0\tTest one ."],
             [("0", _Q, None, "1"), ("1", "Bad sentence it .", None, "0")]),
    "sst2": ("sentence\tlabel", [_Q + "\t1", "bad movie\t0"], "index\tsentence", ["0\tx"],
             [("0", _Q, None, "1"), ("1", "bad movie", None, "0")]),
    "mrpc": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", ["1\t11\t12\tA .\t" + _Q],
             "index\t#1 ID\t#2 ID\t#1 String\t#2 String", ["0\t1\t2\tx\ty"],
             [("0", "A .", _Q, "1")]),
    "stsb": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
             "\tscore", ["7\tmain-news\tf\t2012\t0001\tnone\tnone\tA man .\tA guy .\t4.250"],
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
             ["0\tg\tf\t2012\t0\tnone\tnone\ta\tb"], [("7", "A man .", "A guy .", 4.25)]),
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            ["201\t1\t2\tWhy ?\tHow ?\t0"], "id\tquestion1\tquestion2", ["0\ta\tb"],
            [("201", "Why ?", "How ?", "0")]),
    "qnli": ("index\tquestion\tsentence\tlabel", ["3\tWho ?\tHe .\tnot_entailment"],
             "index\tquestion\tsentence", ["0\ta\tb"], [("3", "Who ?", "He .", "not_entailment")]),
    "rte": ("index\tsentence1\tsentence2\tlabel", ["0\tP .\tH .\tentailment"],
            "index\tsentence1\tsentence2", ["0\ta\tb"], [("0", "P .", "H .", "entailment")]),
    "wnli": ("index\tsentence1\tsentence2\tlabel", ["5\tP .\tH .\t1"],
             "index\tsentence1\tsentence2", ["0\ta\tb"], [("5", "P .", "H .", "1")]),
}
_DIRS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP",
         "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


@pytest.mark.parametrize("task", sorted(GLUE_FILES))
def test_glue_tsv_layouts(tmp_path, task):
    header, rows, test_header, test_rows, expected = GLUE_FILES[task]
    lines = ([header] if header else []) + rows
    # MRPC's headers start with a BOM; CoLA/dev.tsv has no final newline.
    _write(tmp_path, f"glue_data/{_DIRS[task]}/dev.tsv", "\n".join(lines) +
           ("" if task == "cola" else "\n"), bom=(task == "mrpc"))
    _write(tmp_path, f"glue_data/{_DIRS[task]}/test.tsv", "\n".join([test_header] + test_rows))
    examples, num_bad = readers.read_examples(task, "dev", str(tmp_path))
    assert num_bad == 0
    assert examples == [InputExample(*e) for e in expected]
    test, _ = readers.read_examples(task, "test", str(tmp_path))
    assert [ex.guid for ex in test] == ["0"] and test[0].label is None


def test_glue_malformed_rows_error_with_file_and_line(tmp_path):
    path = _write(tmp_path, "glue_data/RTE/dev.tsv",
                  "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n"
                  "1\ta\tb\tc\tentailment\n2\ta\tb\tmaybe\n3\ta\tb\tnot_entailment\n")
    with pytest.raises(DataFormatError) as error:
        readers.read_examples("rte", "dev", str(tmp_path))
    assert str(error.value).startswith(f"{path}:3: expected 4 tab-separated fields, found 5")
    examples, num_bad = readers.read_examples("rte", "dev", str(tmp_path), skip_bad_rows=True)
    assert num_bad == 2 and [ex.guid for ex in examples] == ["0", "3"]
    # The label check alone:
    _write(tmp_path, "glue_data/RTE/dev.tsv",
           "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(DataFormatError, match=r":2: label 'maybe' not in"):
        readers.read_examples("rte", "dev", str(tmp_path))
    _write(tmp_path, "glue_data/STS-B/dev.tsv", GLUE_FILES["stsb"][0] +
           "\n1\tg\tf\ty\t0\tn\tn\ta\tb\tfive\n")
    with pytest.raises(DataFormatError, match=":2: label 'five' is not a finite number"):
        readers.read_examples("stsb", "dev", str(tmp_path))


def test_glue_missing_label_column_is_a_file_error(tmp_path):
    _write(tmp_path, "glue_data/RTE/dev.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n")
    with pytest.raises(DataFormatError, match=":1: no column 'label'"):
        readers.read_examples("rte", "dev", str(tmp_path))


def test_glue_lines_split_on_newline_only(tmp_path):
    # \x0b and U+2028 are line breaks to str.splitlines(), not to GLUE files.
    _write(tmp_path, "glue_data/SST-2/dev.tsv", "sentence\tlabel\na\x0bb\u2028c\t1\r\n")
    examples, _ = readers.read_examples("sst2", "dev", str(tmp_path))
    assert examples == [InputExample("0", "a\x0bb\u2028c", None, "1")]


def test_mnli_sources_and_fallbacks(tmp_path):
    root = str(tmp_path)
    _write(root, "glue_data/MNLI/train.random-subset-20000.tokenized.tsv",
           "sentence1\tsentence2\tlabel\tgenre\nit 's `` ok ''\tIt is .\tneutral\tfiction\n")
    train, _ = readers.read_examples("mnli", "train", root)
    assert train == [InputExample("0", "it 's `` ok ''", "It is .", "neutral")]
    # The full GLUE train file wins when present (label = gold_label, the last column).
    header = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
              "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label")
    _write(root, "glue_data/MNLI/train.tsv",
           header + "\n0\t1\t1e\tgov\t(\t(\t(\t(\tP .\tH .\tneutral\tentailment\n")
    assert readers.data_path("mnli", "train", root).endswith("glue_data/MNLI/train.tsv")
    train, _ = readers.read_examples("mnli", "train", root)
    assert train == [InputExample("0", "P .", "H .", "entailment")]
    # MultiNLI dev CSV: standard quoting, "-" rows dropped, guids number the kept rows.
    _write(root, "multinli_1.0/multinli_1.0_dev_matched.csv",
           'pairID,sentence1,sentence2,label\n1n,"a, ""b""",c ,neutral\n2x,d,e,-\n'
           '3c,"multi\nline",f,contradiction\n')
    dev, num_bad = readers.read_examples("mnli", "dev_matched", root)
    assert num_bad == 0
    assert dev == [InputExample("0", 'a, "b"', "c ", "neutral"),
                   InputExample("1", "multi\nline", "f", "contradiction")]
    _write(root, "glue_data/diagnostic/diagnostic.tsv",
           "index\tsentence1\tsentence2\n0\tThe cat sat.\tThe cat did not sit.")
    ax, _ = readers.read_examples("mnli", "ax", root)
    assert ax == [InputExample("0", "The cat sat.", "The cat did not sit.", None)]


def test_submission_roundtrip(tmp_path):
    examples = [InputExample(str(i), "a", "b", None) for i in (3, 1, 2)]
    path = str(tmp_path / "MNLI-m.tsv")
    predictions.write_tsv("mnli", examples, np.array([0, 2, 1]), path)
    assert pathlib.Path(path).read_text() == (
        "index\tprediction\n3\tcontradiction\n1\tneutral\n2\tentailment\n")
    assert predictions.read_tsv("mnli", path) == {
        "3": "contradiction", "1": "neutral", "2": "entailment"}
    scores = np.array([0.1, 4.999999523162842, 1 / 3], dtype=np.float32)
    predictions.write_tsv("stsb", examples, scores, path)
    read = predictions.read_tsv("stsb", path)
    assert [read[g] for g in ("3", "1", "2")] == [float(s) for s in scores]  # exact
    with pytest.raises(ValueError, match="2 predictions for 3 examples"):
        predictions.write_tsv("rte", examples, [0, 1], path)


def test_example_labels():
    examples = [InputExample("0", "a", "b", "neutral"), InputExample("1", "a", "b",
                                                                     "contradiction")]
    np.testing.assert_array_equal(readers.example_labels("mnli", examples), [2, 0])


# ---------------------------------------------------------------------------------------
# SWAG
# ---------------------------------------------------------------------------------------

_SWAG_HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,"
                "ending2,ending3")


def test_swag_csv(tmp_path):
    _write(tmp_path, "swag/train.csv", _SWAG_HEADER + ",label\n"
           '0,lsmdc1052-94857,18313,"Students lower their eyes nervously. She",'
           'Students lower their eyes nervously.,She,gold,"pats her shoulder, then leaves.",'
           'turns with two students.,walks slowly towards someone.,wheels around.,0\n'
           "1,anetv_x,5,A b,A,b,gen,e0,e1,e2,e3,3\n")
    examples, num_bad = readers.read_examples("swag", "train", str(tmp_path))
    assert num_bad == 0
    assert examples[0] == SwagExample(
        "0", "Students lower their eyes nervously.", "She",
        ("pats her shoulder, then leaves.", "turns with two students.",
         "walks slowly towards someone.", "wheels around."), 0)
    assert examples[1].label == 3 and examples[1].guid == "1"
    _write(tmp_path, "swag/test.csv", _SWAG_HEADER + "\n7,v,1,s,c,d,gen,a,b,c,d\n")
    test, _ = readers.read_examples("swag", "test", str(tmp_path))
    assert test == [SwagExample("7", "c", "d", ("a", "b", "c", "d"), None)]
    # Without the unnamed index column the guid is the row number; label 4 is bad.
    _write(tmp_path, "swag/val.csv", _SWAG_HEADER[1:] + ",label\nv,1,s,c,d,gen,a,b,c,d,4\n"
           "v,2,s,c,d,gen,a,b,c,d,2\n")
    with pytest.raises(DataFormatError, match=r"val.csv:2: label '4'"):
        readers.read_examples("swag", "dev", str(tmp_path))
    dev, num_bad = readers.read_examples("swag", "dev", str(tmp_path), skip_bad_rows=True)
    assert num_bad == 1 and dev[0].guid == "1" and dev[0].label == 2


# ---------------------------------------------------------------------------------------
# CoNLL-2003
# ---------------------------------------------------------------------------------------

_CONLL = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
Smith NNP I-NP B-PER

-DOCSTART- -X- O O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O
"""


def test_conll_documents_and_iob1_to_bio(tmp_path):
    _write(tmp_path, "conll2003/eng.testa", _CONLL)
    sentences, num_bad = readers.read_examples("conll2003", "dev", str(tmp_path))
    assert num_bad == 0
    assert sentences == [
        NerSentence(0, ("EU", "rejects", "German", "call"), ("B-ORG", "O", "B-MISC", "O")),
        NerSentence(0, ("Peter", "Blackburn", "Smith"), ("B-PER", "I-PER", "B-PER")),
        NerSentence(1, ("BRUSSELS", "1996-08-22"), ("B-LOC", "O"))]


def test_conll_bad_lines(tmp_path):
    path = _write(tmp_path, "conll2003/bio/valid.txt",
                  _CONLL.replace("call NN I-NP O", "call NN O").replace("I-LOC", "I-CITY"))
    with pytest.raises(DataFormatError) as error:
        readers.read_examples("conll2003", "dev", str(tmp_path))
    assert str(error.value).startswith(f"{path}:6: expected 4")
    sentences, num_bad = readers.read_examples("conll2003", "dev", str(tmp_path),
                                               skip_bad_rows=True)
    assert num_bad == 2  # the whole sentence of each bad line is dropped
    assert [s.words[0] for s in sentences] == ["Peter"]


def test_to_bio():
    assert readers.to_bio(["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]) == [
        "B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]
    bio = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC"]
    assert readers.to_bio(bio) == bio


# ---------------------------------------------------------------------------------------
# Real data (../shared/data): counts from its README, every row valid
# ---------------------------------------------------------------------------------------

REAL_COUNTS = {
    ("cola", "train"): 8551, ("cola", "dev"): 1043, ("cola", "test"): 1063,
    ("sst2", "train"): 67349, ("sst2", "dev"): 872, ("sst2", "test"): 1821,
    ("mrpc", "train"): 3668, ("mrpc", "dev"): 408, ("mrpc", "test"): 1725,
    ("stsb", "train"): 5749, ("stsb", "dev"): 1500, ("stsb", "test"): 1379,
    ("qnli", "dev"): 5463, ("qnli", "test"): 5463,
    ("rte", "train"): 2490, ("rte", "dev"): 277, ("rte", "test"): 3000,
    ("wnli", "train"): 635, ("wnli", "dev"): 71, ("wnli", "test"): 146,
    ("mnli", "train"): 20000, ("mnli", "dev_matched"): 9815,
    ("mnli", "dev_mismatched"): 9832, ("mnli", "ax"): 1104,
    ("squad1.1", "train"): 87599, ("squad1.1", "dev"): 10570, ("squad2.0", "dev"): 11873,
    ("conll2003", "train"): 14041, ("conll2003", "dev"): 3250, ("conll2003", "test"): 3453,
}


@pytest.mark.slow
def test_real_data_counts(data_dir):
    for (task, split), count in REAL_COUNTS.items():
        examples, num_bad = readers.read_examples(task, split, data_dir)
        assert (task, split, len(examples), num_bad) == (task, split, count, 0)
        if task == "conll2003":
            continue
        if readers.is_labelled(task, split) and TASKS[task].kind == "classification":
            assert {ex.label for ex in examples} == set(TASKS[task].labels)
        if not readers.is_labelled(task, split):
            assert [ex.guid for ex in examples] == [str(i) for i in range(count)]


@pytest.mark.slow
def test_real_mnli_labels(data_dir):
    counts = {split: collections.Counter(ex.label for ex in readers.read_examples(
        "mnli", split, data_dir)[0]) for split in ("train", "dev_matched", "dev_mismatched")}
    assert counts["dev_matched"] == {"entailment": 3479, "neutral": 3123, "contradiction": 3213}
    assert counts["dev_mismatched"] == {"entailment": 3463, "neutral": 3129,
                                        "contradiction": 3240}
    assert counts["train"] == {"entailment": 6709, "neutral": 6646, "contradiction": 6645}
    dev, _ = readers.read_examples("mnli", "dev_matched", data_dir)
    assert dev[0] == InputExample("0", "The new rights are nice enough",
                                  "Everyone really likes the newest benefits ", "neutral")


@pytest.mark.slow
def test_real_conll_iob1_equals_bio_copy(data_dir, tmp_path):
    for original, copy in (("eng.train", "train.txt"), ("eng.testa", "valid.txt"),
                           ("eng.testb", "test.txt")):
        from_iob1, _ = readers.read_file("conll2003", "dev", f"{data_dir}/conll2003/{original}")
        from_bio, _ = readers.read_file("conll2003", "dev", f"{data_dir}/conll2003/bio/{copy}")
        assert from_iob1 == from_bio
    documents = {s.doc_id for s in from_iob1}
    assert documents == set(range(231))  # eng.testb: 231 documents
