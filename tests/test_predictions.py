"""Prediction files: each kind's write/read pair round-trips, and `write_split` names the
files as the runner documents them. (The TSV round trip: tests/test_readers.py.)"""

import json

import numpy as np
import pytest

from glue_suite import predictions as P
from glue_suite.readers import DataFormatError, InputExample, NerSentence
from glue_suite.squad_postprocess import SquadPredictions
from glue_suite.squad_readers import SquadExample
from glue_suite.tasks import TASKS


def test_conll_round_trip(tmp_path):
    sentences = [NerSentence(0, ("John", "lives"), ("B-PER", "O")),
                 NerSentence(0, ("in", "Paris", "."), ("O", "B-LOC", "O"))]
    tags = [["B-PER", "O"], ["O", "B-ORG", "O"]]
    path = str(tmp_path / "dev_predictions.txt")
    P.write_conll(sentences, tags, path)
    assert (tmp_path / "dev_predictions.txt").read_text() == (
        "John B-PER B-PER\nlives O O\n\nin O O\nParis B-LOC B-ORG\n. O O\n\n")
    assert P.read_conll(path) == [[("John", "B-PER", "B-PER"), ("lives", "O", "O")],
                                  [("in", "O", "O"), ("Paris", "B-LOC", "B-ORG"),
                                   (".", "O", "O")]]
    (tmp_path / "bad.txt").write_text("John B-PER\n")
    with pytest.raises(DataFormatError, match="bad.txt:1: "):
        P.read_conll(str(tmp_path / "bad.txt"))


def test_squad_files_round_trip(tmp_path):
    result = SquadPredictions(predictions={"q1": "paris", "q2": ""},
                              nbest={"q1": [], "q2": []},
                              best_non_null={"q1": "paris", "q2": "london"},
                              null_odds={"q1": -2.0, "q2": 1.5})
    paths = P.write_squad(str(tmp_path), result, version_2=True, best_threshold=2.0)
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        "predictions.json", "nbest_predictions.json", "null_odds.json",
        "best_non_null_predictions.json", "predictions_best_threshold.json"]
    assert P.read_squad(paths[0]) == result.predictions
    assert P.read_null_odds(paths[2]) == result.null_odds
    assert P.read_squad(paths[4]) == {"q1": "paris", "q2": "london"}  # 1.5 <= 2.0: answered
    (tmp_path / "v1").mkdir()
    assert len(P.write_squad(str(tmp_path / "v1"), result, version_2=False)) == 2


@pytest.mark.parametrize("task,split,predicted,name", [
    ("rte", "dev", np.array([1, 0]), "dev_predictions.tsv"),
    ("stsb", "dev", np.array([0.5, 4.25], np.float32), "dev_predictions.tsv"),
    ("mnli", "dev_mismatched", np.array([2, 0]), "dev_mismatched_predictions.tsv")])
def test_write_split_per_kind(tmp_path, task, split, predicted, name):
    examples = [InputExample("7", "a", "b", None), InputExample("9", "c", "d", None)]
    paths = P.write_split(TASKS[task], split, examples, predicted, str(tmp_path))
    assert paths == [str(tmp_path / name)]
    read = P.read_tsv(task, paths[0])
    assert list(read) == ["7", "9"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary file left
    if task == "stsb":
        assert [read["7"], read["9"]] == [0.5, 4.25]


def test_write_split_conll_and_squad_names(tmp_path):
    sentence = NerSentence(0, ("Paris",), ("B-LOC",))
    assert P.write_split(TASKS["conll2003"], "test", [sentence], [["B-LOC"]],
                         str(tmp_path)) == [str(tmp_path / "test_predictions.txt")]
    result = SquadPredictions({"q": "x"}, {"q": []}, {"q": "x"}, {})
    paths = P.write_split(TASKS["squad1.1"], "dev", [], result, str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["predictions.json",
                                                     "nbest_predictions.json"]
    assert json.loads((tmp_path / "predictions.json").read_text()) == {"q": "x"}


def _squad_example(qid, answers):
    return SquadExample(qid, "q?", "c", ["c"], [0], answers, not answers)


@pytest.mark.parametrize("task,examples,predicted", [
    ("rte", [InputExample("7", "a", "b", None), InputExample("9", "c", "d", None)],
     np.array([1, 0])),
    ("stsb", [InputExample("7", "a", "b", None)], np.array([4.25], np.float32)),
    ("conll2003", [NerSentence(0, ("Paris", "is"), ("B-LOC", "O"))], [["B-LOC", "B-PER"]]),
    ("squad1.1", [_squad_example("q1", ["paris"])],
     SquadPredictions({"q1": "paris"}, {"q1": [{"text": "paris"}]}, {"q1": "paris"}, {})),
    ("squad2.0", [_squad_example("q1", ["paris"]), _squad_example("q2", [])],
     SquadPredictions({"q1": "paris", "q2": ""}, {"q1": [], "q2": []},
                      {"q1": "paris", "q2": "rome"}, {"q1": -2.0, "q2": 1.5}))])
def test_a_split_written_from_its_restart_is_the_split_written_from_the_model(
        tmp_path, task, examples, predicted):
    """A best run finished on another machine has its restart's files and not its model:
    its dev outputs, made from them, are those its predictions made (SQuAD: but for the
    n-best lists, which a restart does not keep)."""
    spec = TASKS[task]
    restart, from_model, from_restart = (tmp_path / n for n in ("r", "m", "s"))
    for d in (restart, from_model, from_restart):
        d.mkdir()
    P.write_restart(spec, "dev", examples, predicted, str(restart))
    expected = P.write_split(spec, "dev", examples, predicted, str(from_model))
    written = P.write_split_from_restart(spec, "dev", examples, str(restart),
                                         str(from_restart))
    assert [p.rsplit("/", 1)[1] for p in written] == [p.rsplit("/", 1)[1] for p in expected]
    for name in sorted(p.name for p in from_model.iterdir()):
        made = (from_restart / name).read_text()
        if name == "nbest_predictions.json":
            assert json.loads(made) == {}
        else:
            assert made == (from_model / name).read_text(), name
