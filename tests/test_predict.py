"""`glue_suite.run --export_dir` (glue_suite.export) and `glue_suite.predict`: the exported
SavedModel, fed the dev file's raw strings, gives the run's dev predictions; on tiny
synthetic data and a tiny checkpoint (test_run's), seconds per task."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.cli import run_main
from bert_tf.tokenization import BertTokenizer
from glue_suite import export, predict, predictions, readers, run, task_models
from glue_suite import features as F
from glue_suite.squad_readers import squad_examples
from glue_suite.tasks import TASKS
from test_run import make_checkpoint, make_data

DEV_FILES = {"rte": "glue_data/RTE/dev.tsv", "stsb": "glue_data/STS-B/dev.tsv",
             "swag": "swag/val.csv", "squad1.1": "squad/v1.1/dev-v1.1.json",
             "squad2.0": "squad/v2.0/dev-v2.0.json"}
SQUAD_FLAGS = ("--max_seq_length", "32", "--doc_stride", "8", "--max_query_length", "8")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    return make_checkpoint(root / "ckpt"), make_data(root / "data")


def tokenizer_of(world):
    return BertTokenizer(os.path.join(world[0], "vocab.txt"))


@pytest.fixture(scope="module")
def exported(world, tmp_path_factory):
    """task -> (run dir, export dir, the best model) of a CLI run with --export_dir,
    made once per task. RTE searches two learning rates (the best one is exported)."""
    done = {}

    def get(task):
        if task not in done:
            done[task] = run_and_export(world, tmp_path_factory.mktemp(task), task)
        return done[task]
    return get


def run_and_export(world, directory, task):
    checkpoint, data = world
    best = {}
    original = export.export_task_model

    def keep_model(model, *args):
        best["model"] = model
        original(model, *args)

    out, saved = directory / "run", directory / "saved_model"
    extra = SQUAD_FLAGS if task.startswith("squad") else ()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(export, "export_task_model", keep_model)
        assert run.main([
            "--task", task, "--init_checkpoint", checkpoint, "--data_dir", data,
            "--output_dir", str(out), "--export_dir", str(saved), "--epochs", "1",
            "--batch_size", "4", "--learning_rates", "1e-3,1e-4" if task == "rte" else "1e-3",
            "--verbose", "0", "--max_seq_length", "48", "--run_eagerly", *extra]) == 0
    return out, saved, best["model"]


def predict_file(saved, task, world, output_file):
    dev = os.path.join(world[1], DEV_FILES[task])
    assert predict.main(["--model", str(saved), "--input_file", dev,
                         "--output_file", str(output_file), "--batch_size", "4"]) == 0
    return dev


@pytest.mark.parametrize("task", ["rte", "stsb", "swag"])
def test_saved_model_gives_the_runs_dev_predictions(world, exported, tmp_path, task):
    out, saved, model = exported(task)
    dev = predict_file(saved, task, world, tmp_path / "dev.tsv")
    ours = predictions.read_tsv(task, str(tmp_path / "dev.tsv"))
    runs = predictions.read_tsv(task, str(out / "dev_predictions.tsv"))
    assert ours.keys() == runs.keys()
    if task == "stsb":  # scores, written exactly by both
        np.testing.assert_allclose([ours[k] for k in runs], list(runs.values()), atol=1e-4)
        return
    assert ours == runs  # labels

    # Probabilities: the SavedModel's (JSONL) against the Keras model's on the features.
    predict_file(saved, task, world, tmp_path / "dev.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    served = np.array([[r["probabilities"][label] for label in TASKS[task].labels]
                       for r in rows])
    examples, _ = readers.read_file(task, "dev", dev)
    tokenizer = tokenizer_of(world)
    features = F.convert_examples(task, examples, tokenizer, F.FeatureSettings(48),
                                  labelled=False, training=False)
    logits = model(task_models.model_inputs(features), training=False)
    np.testing.assert_allclose(served, tf.nn.softmax(logits, -1).numpy(), atol=1e-4)


@pytest.mark.parametrize("task", ["squad1.1", "squad2.0"])
def test_saved_model_squad_windows_and_answers_are_the_runs(world, exported, tmp_path, task):
    """The windows are made in the graph, post-processing runs outside: the same answers
    (and v2.0 null odds) as the run's predictions.json."""
    out, saved, _ = exported(task)
    predict_file(saved, task, world, tmp_path / "answers.json")
    answers = json.loads((tmp_path / "answers.json").read_text())
    assert answers == json.loads((out / "predictions.json").read_text())
    if task == "squad2.0":
        odds = json.loads((tmp_path / "answers.null_odds.json").read_text())
        runs = json.loads((out / "null_odds.json").read_text())
        assert odds.keys() == runs.keys()
        np.testing.assert_allclose([odds[k] for k in runs], list(runs.values()), atol=1e-4)


def test_squad_windows_in_the_graph_are_the_featurizers(world):
    """Long contexts (many windows, stride below and above the room), several spaces,
    U+202F: the graph's windows equal `features.squad_features`'s, array for array."""
    tokenizer = tokenizer_of(world)
    examples, _ = readers.read_examples("squad2.0", "dev", world[1])
    qas = [{"id": "a", "question": "the dog ? " * 3, "answers": [], "is_impossible": True}]
    articles = [{"paragraphs": [
        {"context": "  the dog\u202fruns \t in (paris).  " * 5, "qas": qas},
        {"context": "dogs", "qas": [{**qas[0], "id": "b", "question": "the"}]}]}]
    examples += squad_examples(articles, version_2=True, training=False)[0]
    for settings in (F.FeatureSettings(32, 8, 8), F.FeatureSettings(24, 5, 6),
                     F.FeatureSettings(48, 128, 64)):
        expected = F.squad_features("squad2.0", examples, tokenizer, settings, training=False)
        got = export.squad_windows(tokenizer, tf.constant([e.question_text for e in examples]),
                                   tf.constant([e.context_text for e in examples]), settings)
        for key in ("input_ids", "input_mask", "segment_ids", "example_index",
                    "token_to_orig", "token_is_max_context"):
            np.testing.assert_array_equal(got[key].numpy(), expected[key], err_msg=key)


def test_bad_input_and_unexportable_task(world, exported, tmp_path, capsys):
    _, saved, _ = exported("rte")
    bad = tmp_path / "bad.tsv"
    bad.write_text("index\tsentence1\tsentence2\n0\ta dog\tthe cat\n1\tonly one field\n")
    with pytest.raises(SystemExit) as exit_info:
        run_main(predict.main, ["--model", str(saved), "--input_file", str(bad),
                                "--output_file", str(tmp_path / "out.tsv")])
    assert exit_info.value.code == 2
    assert f"{bad}:3: expected 3 tab-separated fields" in capsys.readouterr().err

    code = run.main(["--task", "conll2003", "--init_checkpoint", world[0], "--data_dir",
                     world[1], "--output_dir", str(tmp_path / "ner"), "--export_dir",
                     str(tmp_path / "ner_model")])
    assert code == 2 and "not exported" in capsys.readouterr().err
