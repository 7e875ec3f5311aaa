"""`--source tfds` under tfds.testing.mock_data (no network): the same examples as the
file readers produce from the same records."""

import json

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets")

from glue_suite import readers, tfds_source  # noqa: E402
from glue_suite.tasks import TASKS  # noqa: E402


def _mock(records_by_split):
    """mock_data whose builders yield `records_by_split[(tfds name, tfds split)]`."""
    def as_dataset(builder, split, *args, **kwargs):
        # "glue/cola", "squad/v1.1"; conll2003's one config is not part of its name.
        name = f"{builder.name}/{builder.builder_config.name}"
        key = (name, str(split)) if (name, str(split)) in records_by_split else (
            builder.name, str(split))
        records = records_by_split[key]
        signature = tf.nest.map_structure(
            lambda v: tf.TensorSpec([None] * np.ndim(v), tf.as_dtype(np.asarray(v).dtype)),
            records[0])
        return tf.data.Dataset.from_generator(lambda: iter(records), output_signature=signature)
    return tfds.testing.mock_data(as_dataset_fn=as_dataset)


def _glue_records(text_features, rows, label_of):
    return [{**{f: t.encode() for f, t in zip(text_features, texts)},
             "label": label_of(label), "idx": np.int32(i)} for i, (texts, label) in enumerate(rows)]


def test_split_names():
    assert tfds_source.tfds_split("mnli", "dev_mismatched") == (
        "glue/mnli", "validation_mismatched")
    assert tfds_source.tfds_split("mnli", "ax") == ("glue/ax", "test")
    assert tfds_source.tfds_split("squad2.0", "dev") == ("squad/v2.0", "validation")
    assert tfds_source.tfds_split("conll2003", "dev") == ("conll2003", "dev")
    with pytest.raises(ValueError, match="SWAG is not in tensorflow-datasets"):
        tfds_source.tfds_split("swag", "train")


@pytest.mark.parametrize("task,split", [("rte", "dev"), ("stsb", "train"),
                                        ("mnli", "dev_mismatched"), ("mnli", "ax"),
                                        ("cola", "test")])
def test_random_mock_data(task, split):
    with tfds.testing.mock_data(num_examples=5):
        examples, num_bad = tfds_source.load_examples(task, split)
    assert len(examples) == 5 and num_bad == 0
    for ex in examples:
        assert isinstance(ex, readers.InputExample) and ex.guid.isdigit()
        assert isinstance(ex.text_a, str) and (ex.text_b is None) == (task == "cola")
        if readers.is_labelled(task, split) and task != "stsb":
            assert ex.label in TASKS[task].labels
        elif task == "stsb":
            assert isinstance(ex.label, float)
        else:
            assert ex.label is None


def test_glue_same_examples_as_files(tmp_path):
    # CoLA (tfds names unacceptable/acceptable = "0"/"1"), MNLI (premise/hypothesis,
    # entailment/neutral/contradiction = 0/1/2), WNLI (not_entailment = 0), STS-B scores.
    cola_rows = [(("He left .",), "1"), (("Left he the .",), "0")]
    (tmp_path / "glue_data/CoLA").mkdir(parents=True)
    (tmp_path / "glue_data/CoLA/dev.tsv").write_text(
        "".join(f"src\t{y}\t\t{x[0]}\n" for x, y in cola_rows))
    mnli_rows = [(("P1 .", "H1 ."), "neutral"), (("P2 .", 'H2 "q" .'), "contradiction")]
    (tmp_path / "multinli_1.0").mkdir()
    (tmp_path / "multinli_1.0/multinli_1.0_dev_matched.csv").write_text(
        "pairID,sentence1,sentence2,label\n" +
        "".join(f'{i}n,{p},"{h.replace(chr(34), 2 * chr(34))}",{y}\n'
                for i, ((p, h), y) in enumerate(mnli_rows)))
    wnli_rows = [(("A .", "B ."), "1"), (("C .", "D ."), "0")]
    (tmp_path / "glue_data/WNLI").mkdir()
    (tmp_path / "glue_data/WNLI/train.tsv").write_text(
        "index\tsentence1\tsentence2\tlabel\n" +
        "".join(f"{i}\t{a}\t{b}\t{y}\n" for i, ((a, b), y) in enumerate(wnli_rows)))
    stsb_rows = [(("A man .", "A guy ."), 4.25), (("X", "Y"), 0.5)]
    (tmp_path / "glue_data/STS-B").mkdir()
    (tmp_path / "glue_data/STS-B/dev.tsv").write_text(
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        + "".join(f"{i}\tg\tf\t2012\t0\tn\tn\t{a}\t{b}\t{y}\n"
                  for i, ((a, b), y) in enumerate(stsb_rows)))
    records = {
        ("glue/cola", "validation"): _glue_records(
            ["sentence"], cola_rows, lambda y: np.int64(int(y))),
        ("glue/mnli", "validation_matched"): _glue_records(
            ["premise", "hypothesis"], mnli_rows,
            lambda y: np.int64(["entailment", "neutral", "contradiction"].index(y))),
        ("glue/wnli", "train"): _glue_records(
            ["sentence1", "sentence2"], wnli_rows, lambda y: np.int64(int(y))),
        ("glue/stsb", "validation"): _glue_records(
            ["sentence1", "sentence2"], stsb_rows, np.float32),
    }
    with _mock(records):
        for task, split in (("cola", "dev"), ("mnli", "dev_matched"), ("wnli", "train"),
                            ("stsb", "dev")):
            ours, num_bad = tfds_source.load_examples(task, split)
            files, _ = readers.read_examples(task, split, str(tmp_path))
            assert num_bad == 0 and ours == files, task


_CONTEXT = "Sky\u202fis  blue.\nGrass is (green)."


def _squad_record(qid, question, answers, version_2=False, is_impossible=False):
    record = {"id": qid.encode(), "title": b"T", "context": _CONTEXT.encode(),
              "question": question.encode(),
              "answers": {"text": np.array([a.encode() for a, _ in answers], dtype=object),
                          "answer_start": np.array([s for _, s in answers], dtype=np.int32)}}
    if version_2:
        record["is_impossible"] = np.bool_(is_impossible)
        record["plausible_answers"] = {"text": np.array([b"x"], dtype=object),
                                       "answer_start": np.array([0], dtype=np.int32)}
    return record


def test_squad_same_examples_as_files(tmp_path):
    qas = [("q1", "What is blue?", [("Sky", 0)], False),
           ("q2", "Grass?", [("green", 24)], False), ("q3", "Why?", [], True)]
    for version, version_2 in (("v1.1", False), ("v2.0", True)):
        task = "squad2.0" if version_2 else "squad1.1"
        questions = qas if version_2 else qas[:2]
        data = {"version": version, "data": [{"title": "T", "paragraphs": [{
            "context": _CONTEXT, "qas": [
                {"id": q, "question": t, "answers": [{"text": a, "answer_start": s}
                                                     for a, s in ans],
                 **({"is_impossible": imp} if version_2 else {})}
                for q, t, ans, imp in questions]}]}]}
        (tmp_path / f"squad/{version}").mkdir(parents=True)
        for name in (f"train-{version}.json", f"dev-{version}.json"):
            (tmp_path / f"squad/{version}/{name}").write_text(json.dumps(data))
        records = [_squad_record(q, t, ans, version_2, imp) for q, t, ans, imp in questions]
        with _mock({(f"squad/{version}", "train"): records,
                    (f"squad/{version}", "validation"): records}):
            for split in ("train", "dev"):
                ours, num_bad = tfds_source.load_examples(task, split)
                files, _ = readers.read_examples(task, split, str(tmp_path))
                assert num_bad == 0 and ours == files, (task, split)
                assert ours[0].doc_tokens == ("Sky", "is", "blue.", "Grass", "is", "(green).")


def test_conll_sentences_are_documents():
    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    sentences = [(["EU", "rejects", "German"], ["B-ORG", "O", "B-MISC"]),
                 (["Peter", "Blackburn"], ["B-PER", "I-PER"])]
    records = [{"tokens": np.array([w.encode() for w in words], dtype=object),
                "pos": np.zeros(len(words), np.int64), "chunks": np.zeros(len(words), np.int64),
                "ner": np.array([names.index(t) for t in tags], np.int64)}
               for words, tags in sentences]
    with _mock({("conll2003", "dev"): records}):
        ours, num_bad = tfds_source.load_examples("conll2003", "dev")
    assert num_bad == 0 and ours == [readers.NerSentence(i, tuple(w), tuple(t))
                                     for i, (w, t) in enumerate(sentences)]


@pytest.mark.slow
def test_real_rte_dev_through_tfds_records(data_dir):
    """RTE dev as tfds would hold it (label ids, idx) maps back to the file's examples."""
    files, _ = readers.read_examples("rte", "dev", data_dir)
    records = [{"sentence1": ex.text_a.encode(), "sentence2": ex.text_b.encode(),
                "label": np.int64(TASKS["rte"].labels.index(ex.label)),
                "idx": np.int32(int(ex.guid))} for ex in files]
    with _mock({("glue/rte", "validation"): records}):
        ours, _ = tfds_source.load_examples("rte", "dev")
    assert ours == files and len(ours) == 277


# ------------------------------------------------------------------------- no data set up
def test_source_falls_back_to_tfds_only_without_any_data_directory(tmp_path, monkeypatch):
    from glue_suite.data_dir import resolve_source
    monkeypatch.chdir(tmp_path)  # no ./data here
    monkeypatch.setenv("BERT_DATA_DIR", str(tmp_path / "absent"))
    assert resolve_source(None, None, "glue/rte") == (str(tmp_path / "absent"), "tfds")
    assert resolve_source(None, None, None) == (str(tmp_path / "absent"), "files")  # SWAG
    assert resolve_source("given", None, "glue/rte") == ("given", "files")  # the flag wins
    assert resolve_source(None, "files", "glue/rte")[1] == "files"
    (tmp_path / "absent").mkdir()
    assert resolve_source(None, None, "glue/rte")[1] == "files"
    monkeypatch.delenv("BERT_DATA_DIR")
    assert resolve_source(None, None, "glue/rte") == ("./data", "tfds")


def test_run_without_a_data_directory_reads_tfds(tmp_path, monkeypatch):
    """`glue_suite.run --task rte` with nothing set up: the data comes from tfds (mocked)."""
    from glue_suite import run
    from test_run import make_checkpoint
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BERT_DATA_DIR", str(tmp_path / "absent"))
    rng = np.random.default_rng(0)
    words = ["the", "dog", "cat", "runs", "sees", "a", "man"]
    rows = {split: [((" ".join(rng.choice(words, 4)), " ".join(rng.choice(words, 3))), i % 2)
                    for i in range(n)] for split, n in (("train", 8), ("validation", 4),
                                                        ("test", 2))}
    records = {("glue/rte", split): _glue_records(
        ["sentence1", "sentence2"], r, lambda y: np.int64(-1 if split == "test" else y))
        for split, r in rows.items()}
    with _mock(records):
        assert run.main(["--task", "rte", "--init_checkpoint", make_checkpoint(tmp_path / "c"),
                         "--output_dir", "out", "--epochs", "1", "--batch_size", "4",
                         "--learning_rates", "1e-3", "--max_seq_length", "16",
                         "--verbose", "0", "--run_eagerly"]) == 0
    result = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert result["config"]["source"] == "tfds"
    assert result["data_files"]["train"] == "tfds:glue/rte[train]"
    assert result["train_examples"] == 8 and "reading rte from tensorflow-datasets" in (
        tmp_path / "out" / "run.log").read_text()


def test_offline_tfds_error_names_both_ways_to_the_data(tmp_path, monkeypatch):
    def offline(self, *args, **kwargs):
        raise ConnectionError("Failed to resolve 'dl.fbaipublicfiles.com'")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", offline)
    from glue_suite.data_dir import MissingDataError
    with pytest.raises(MissingDataError) as error:
        tfds_source.load_examples("rte", "train", str(tmp_path))
    message = str(error.value)
    assert message.startswith("tfds:glue/rte: tensorflow-datasets could not download")
    assert "ConnectionError: Failed to resolve" in message
    assert "BERT_DATA_DIR" in message and "glue_data/RTE/train.tsv" in message
    assert "tfds build glue/rte" in message and "--tfds_data_dir" in message
    # And a missing file in a data directory names tfds as the other way.
    with pytest.raises(MissingDataError, match="--source tfds"):
        readers.read_examples("rte", "train", str(tmp_path))


def test_a_record_of_a_tfds_run_reads_its_gold_from_tfds(tmp_path, monkeypatch):
    """reproduce.statistics reads a harness record's gold again from where the run read
    its data: here tensorflow-datasets (the record names "tfds:glue/cola[validation]"),
    from the copy tfds prepared, never by downloading it."""
    from glue_suite import predictions
    from reproduce import statistics
    result = {"task": "cola", "config": {"tfds_data_dir": None},
              "data_files": {"dev": tfds_source.source_name("cola", "dev")}}
    with tfds.testing.mock_data(num_examples=5):
        gold = statistics._data_gold(result, "dev", None)
        examples, _ = tfds_source.load_examples("cola", "dev")
    assert len(gold) == 5
    assert gold == predictions.gold_values(TASKS["cola"], examples)

    # Not prepared here: unavailable at once (offline, a download attempt would retry for
    # minutes before failing).
    def download(self, *args, **kwargs):
        raise AssertionError("the tables tried to download")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", download)
    result["config"]["tfds_data_dir"] = str(tmp_path)
    with pytest.raises(statistics.Unavailable, match="has not prepared it") as error:
        statistics._data_gold(result, "dev", None)
    assert str(tmp_path) not in str(error.value)  # the reason lands in committed tables
