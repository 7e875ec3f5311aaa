"""`python -m glue_suite.evaluate` as a user runs it, checked against independent scorers."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from glue_suite import predictions as P
from glue_suite import readers
from glue_suite.squad_readers import load_squad_json

REPO = pathlib.Path(__file__).resolve().parents[1]


def _evaluate(*args):
    """Runs the CLI; returns (exit code, parsed stdout or None, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "glue_suite.evaluate", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    result = json.loads(proc.stdout) if proc.returncode == 0 else None
    return proc.returncode, result, proc.stderr


def _corrupt(labels, num_classes, rng, fraction=0.25):
    flip = rng.random(len(labels)) < fraction
    return np.where(flip, rng.integers(0, num_classes, len(labels)), labels)


def test_help_documents_the_predictions_format():
    proc = subprocess.run([sys.executable, "-m", "glue_suite.evaluate", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "index<TAB>prediction" in proc.stdout and "--na_prob_file" in proc.stdout


def test_glue_predictions_on_a_synthetic_file(tmp_path):
    dev = tmp_path / "dev.tsv"
    dev.write_text("index\tsentence1\tsentence2\tlabel\n" + "".join(
        f"{i}\ta{i}\tb{i}\t{'entailment' if i % 3 else 'not_entailment'}\n" for i in range(30)))
    examples, _ = readers.read_file("rte", "dev", str(dev))
    labels = readers.example_labels("rte", examples)
    predictions = _corrupt(labels, 2, np.random.default_rng(0))
    preds = tmp_path / "preds.tsv"
    P.write_tsv("rte", examples, predictions, str(preds))
    rc, result, _ = _evaluate("--task", "rte", "--data_file", dev, "--predictions", preds)
    assert rc == 0 and result == {
        "accuracy": pytest.approx(100 * skm.accuracy_score(labels, predictions), abs=1e-10)}
    # A prediction row missing, then a label outside the task's labels: exit 2, one line.
    lines = preds.read_text().splitlines()
    preds.write_text("\n".join(lines[:-1]) + "\n")
    rc, _, err = _evaluate("--task", "rte", "--data_file", dev, "--predictions", preds)
    assert rc == 2 and "1 examples of" in err and "no prediction" in err
    preds.write_text("\n".join(lines[:-1] + ["29\tmaybe"]) + "\n")
    rc, _, err = _evaluate("--task", "rte", "--data_file", dev, "--predictions", preds)
    assert rc == 2 and f"{preds}:31: prediction label 'maybe'" in err


@pytest.mark.slow
@pytest.mark.parametrize("task,relpath", [
    ("mrpc", "glue_data/MRPC/dev.tsv"), ("cola", "glue_data/CoLA/dev.tsv"),
    ("mnli", "multinli_1.0/multinli_1.0_dev_mismatched.csv"), ("stsb", "glue_data/STS-B/dev.tsv")])
def test_glue_dev_files(data_dir, tmp_path, task, relpath):
    data_file = f"{data_dir}/{relpath}"
    examples, _ = readers.read_file(task, "dev", data_file)
    labels = readers.example_labels(task, examples)
    rng = np.random.default_rng(0)
    if task == "stsb":
        predictions = np.clip(labels + rng.normal(0, 1.0, len(labels)), 0, 5).astype(np.float32)
    else:
        predictions = _corrupt(labels, int(labels.max()) + 1, rng)
    preds = tmp_path / "dev_predictions.tsv"
    P.write_tsv(task, examples, predictions, str(preds))
    rc, result, err = _evaluate("--task", task, "--data_file", data_file, "--predictions", preds)
    assert rc == 0, err
    if task == "mrpc":
        expected = {"f1": skm.f1_score(labels, predictions),
                    "accuracy": skm.accuracy_score(labels, predictions)}
    elif task == "cola":
        expected = {"mcc": skm.matthews_corrcoef(labels, predictions)}
    elif task == "mnli":
        expected = {"accuracy": skm.accuracy_score(labels, predictions)}
    else:
        expected = {"pearson": stats.pearsonr(predictions, labels)[0],
                    "spearman": stats.spearmanr(predictions, labels)[0]}
    assert result == {k: pytest.approx(100 * v, abs=1e-9) for k, v in expected.items()}


def _squad_predictions(dataset, rng):
    """Gold answers, a third of them truncated or emptied; unanswerable questions get ""
    or a plausible answer."""
    predictions = {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = qa["answers"] or qa.get("plausible_answers") or [{"text": ""}]
                text = answers[0]["text"] if rng.random() < 0.7 or not qa["answers"] else ""
                if rng.random() < 0.3:
                    text = " ".join(text.split()[:1])
                predictions[qa["id"]] = text if qa["answers"] or rng.random() < 0.5 else ""
    return predictions


@pytest.mark.slow
def test_squad_v1(data_dir, tmp_path):
    official = pytest.importorskip("official.nlp.tools.squad_evaluate_v1_1")
    data_file = f"{data_dir}/squad/v1.1/dev-v1.1.json"
    dataset = load_squad_json(data_file)["data"]
    predictions = _squad_predictions(dataset, np.random.default_rng(0))
    (tmp_path / "predictions.json").write_text(json.dumps(predictions))
    rc, result, err = _evaluate("--task", "squad1.1", "--data_file", data_file,
                                "--predictions", tmp_path / "predictions.json")
    assert rc == 0, err
    theirs = official.evaluate(dataset, predictions)
    assert set(result) == {"exact_match", "f1"}
    assert abs(result["exact_match"] - 100 * theirs["exact_match"]) < 1e-9
    assert abs(result["f1"] - 100 * theirs["final_f1"]) < 1e-9


@pytest.mark.slow
def test_squad_v2_with_null_odds(data_dir, tmp_path):
    official = pytest.importorskip("official.nlp.tools.squad_evaluate_v2_0")
    data_file = f"{data_dir}/squad/v2.0/dev-v2.0.json"
    dataset = load_squad_json(data_file)["data"]
    rng = np.random.default_rng(1)
    predictions = _squad_predictions(dataset, rng)
    null_odds = {qid: float(x) for qid, x in zip(predictions, rng.normal(-1, 3, len(predictions)))}
    (tmp_path / "predictions.json").write_text(json.dumps(predictions))
    (tmp_path / "null_odds.json").write_text(json.dumps(null_odds))
    rc, result, err = _evaluate("--task", "squad2.0", "--data_file", data_file,
                                "--predictions", tmp_path / "predictions.json",
                                "--na_prob_file", tmp_path / "null_odds.json")
    assert rc == 0, err
    theirs = official.evaluate(dataset, predictions, null_odds)
    renamed = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
               "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}
    theirs = {renamed.get(k, k): v for k, v in theirs.items() if not k.startswith("pr_")}
    assert set(result) == set(theirs) == {
        "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
        "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1",
        "best_f1_thresh"}
    for key in result:
        assert abs(result[key] - theirs[key]) < 1e-9, key
