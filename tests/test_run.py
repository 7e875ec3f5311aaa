"""The whole CLI end to end, one tiny run per task kind, on synthetic data in the standard
layout and a tiny saved checkpoint (2 layers, H=16): seconds per task."""

import csv
import importlib.util
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.cli import KERAS_EXTRAS_UNUSED, run_main
from glue_suite import evaluate, run, run_config
from glue_suite import features as F
from glue_suite import predictions
from glue_suite.grid_progress import GridProgress, finished_point_dirs
from glue_suite.predictions import read_tsv
from glue_suite.tasks import TASKS
from harness_helpers import run_plan_stopped_once
from reproduce import partial, statistics
from reproduce.plan import Cell, Plan, Run
from reproduce.records import load_record
from reproduce.runner import run_plan

WORDS = ("the a dog cat man woman runs walks sees likes park house red blue big small "
         "yes no is was he she it paris london john mary france england in on to of").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_vocab(path) -> str:
    # "##s" lets "dogs" split into two pieces (first-piece NER labels, SQuAD spans).
    tokens = SPECIALS + WORDS + ["##s", ".", ",", "?", "'", "-", "(", ")"]
    pathlib.Path(path).write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


def make_checkpoint(directory) -> str:
    """A tiny random BERT saved in our format, with its vocabulary."""
    from bert_tf.checkpoints import save_checkpoint
    from bert_tf.config import BertConfig
    from bert_tf.encoder import BertEncoder
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = write_vocab(directory / "vocab.txt")
    config = BertConfig(vocab_size=len(open(vocab).read().split("\n")) - 1, hidden_size=16,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=64)
    encoder = BertEncoder(config)
    encoder.build()
    # Pretrained on shorter inputs than the tests' --max_seq_length 48: a warning, recorded.
    save_checkpoint(str(directory), {"encoder": encoder}, vocab, lower_case=True,
                    pretraining_seq_length=32)
    return str(directory)


def _sentence(rng, n=None):
    return " ".join(rng.choice(WORDS, n or rng.integers(3, 9)))


def _write(root, relpath, text):
    path = pathlib.Path(root) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _tsv(root, relpath, header, rows):
    _write(root, relpath, "\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n")


def _squad(rng, n_paragraphs, version_2):
    """Paragraphs of 32 whitespace words; answers are single words, one of them "paris"
    inside the word "(paris)." (the original's answer-span alignment case)."""
    paragraphs, count = [], 0
    for _ in range(n_paragraphs):
        words = list(rng.choice(WORDS, 30)) + ["dogs", "(paris)."]
        context = " ".join(words)
        qas = []
        for q in range(3):
            count += 1
            qa = {"id": f"q{count}", "question": _sentence(rng) + " ?"}
            if version_2 and q == 2:
                qas.append({**qa, "answers": [], "is_impossible": True})
                continue
            if q == 1:
                answer = {"text": "paris", "answer_start": context.index("(paris).") + 1}
            else:
                w = int(rng.integers(0, 30))
                answer = {"text": words[w], "answer_start": len(" ".join(words[:w] + [""]))}
            qas.append({**qa, "answers": [answer], **({"is_impossible": False}
                                                       if version_2 else {})})
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "2.0" if version_2 else "1.1",
            "data": [{"title": "t", "paragraphs": paragraphs}]}


def make_data(root, seed=0) -> str:
    """Tiny files in the standard layout for one task of each kind (and MNLI)."""
    rng = np.random.default_rng(seed)
    root = pathlib.Path(root)
    for split, n in (("train", 24), ("dev", 10), ("test", 6)):
        rows = [(i, _sentence(rng), _sentence(rng),
                 rng.choice(["entailment", "not_entailment"])) for i in range(n)]
        header = ["index", "sentence1", "sentence2", "label"]
        if split == "test":
            rows, header = [r[:3] for r in rows], header[:3]
        _tsv(root, f"glue_data/RTE/{split}.tsv", header, rows)

        rows = [(i, "main-captions", "MSRvid", "2012test", i, "none", "none", _sentence(rng),
                 _sentence(rng), round(float(rng.uniform(0, 5)), 3)) for i in range(n)]
        header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
                  "sentence1", "sentence2", "score"]
        if split == "test":
            rows, header = [r[:9] for r in rows], header[:9]
        _tsv(root, f"glue_data/STS-B/{split}.tsv", header, rows)

    labels = ["entailment", "neutral", "contradiction"]
    for split, n in (("train", 24), ("dev_matched", 8), ("dev_mismatched", 7)):
        _tsv(root, f"glue_data/MNLI/{split}.tsv", ["index", "sentence1", "sentence2", "gold_label"],
             [(i, _sentence(rng), _sentence(rng), rng.choice(labels)) for i in range(n)])
    _tsv(root, "glue_data/diagnostic/diagnostic.tsv", ["index", "sentence1", "sentence2"],
         [(i, _sentence(rng), _sentence(rng)) for i in range(5)])

    for version, name in (("v1.1", "1.1"), ("v2.0", "2.0")):
        for split, n in (("train", 4), ("dev", 2)):
            _write(root, f"squad/{version}/{split}-v{name}.json",
                   json.dumps(_squad(rng, n, version == "v2.0")))

    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3", "label"]
    for split, n in (("train", 12), ("val", 6)):
        path = root / "swag" / f"{split}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for i in range(n):
                writer.writerow([i, "v", i, "s", _sentence(rng), _sentence(rng, 2), "gold",
                                 *(_sentence(rng) for _ in range(4)), int(rng.integers(0, 4))])

    tags = ["I-PER", "I-LOC", "I-ORG", "O", "O", "O"]
    for split, n_docs in (("train", 3), ("testa", 2), ("testb", 2)):
        lines = []
        for _ in range(n_docs):
            lines += ["-DOCSTART- -X- -X- O", ""]
            for _ in range(3):
                for word in rng.choice(WORDS + ["dogs"], int(rng.integers(3, 10))):
                    lines.append(f"{word} NN I-NP {rng.choice(tags)}")
                lines.append("")
        _write(root, f"conll2003/eng.{split}", "\n".join(lines) + "\n")
    return str(root)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    return make_checkpoint(root / "ckpt"), make_data(root / "data")


def _argv(world, out, task, *extra):
    checkpoint, data = world
    return ["--task", task, "--init_checkpoint", checkpoint, "--data_dir", data,
            "--output_dir", str(out), "--max_seq_length", "48", "--epochs", "1",
            "--batch_size", "4", "--learning_rates", "1e-3", "--verbose", "0",
            # Tracing tf.function graphs costs more than running a tiny model eagerly;
            # the graph path is tested in test_finetune.
            "--run_eagerly", *extra]


def _main(world, tmp_path, task, *extra):
    out = tmp_path / task
    assert run.main(_argv(world, out, task, *extra)) == 0
    with open(out / "metrics.json", encoding="utf-8") as f:
        return out, json.load(f)


def _check_common(result, task, num_train):
    assert result["task"] == task
    assert set(TASKS[task].metrics) <= set(result["metrics"])
    assert result["train_examples"] == num_train
    assert result["config"]["task"] == task and result["checkpoint"]["format"] == "ours"
    assert result["checkpoint"]["pretraining_seq_length"] == 32
    assert result["hardware"]["packages"]["tensorflow"] and result["hardware"]["cpu_cores"] >= 1
    assert result["wall_seconds"] > 0 and result["command"].startswith("python -m glue_suite.run")
    assert result["featurization"]["train"]["examples_per_second"] > 0
    assert result["bad_rows"]["train"] == 0
    timings = result["timings"]  # where the seconds went
    assert timings["train_steps"] > 0 and timings["evaluate"] > 0
    assert timings["total"] >= timings["featurize"] + timings["train_steps"]


def test_classification_end_to_end_with_grid_seeds_and_submission(world, tmp_path):
    out, result = _main(world, tmp_path, "rte", "--learning_rates", "1e-3,1e-4", "--seeds", "2")
    _check_common(result, "rte", 24)
    grid = result["grid"]
    assert [(r["learning_rate"], r["seed"]) for r in grid["runs"]] == [
        (1e-3, 0), (1e-3, 1), (1e-4, 0), (1e-4, 1)]
    assert [g["runs"] for g in grid["by_learning_rate"]] == [2, 2]
    best = grid["runs"][grid["best"]]
    assert result["metrics"] == best["metrics"]
    assert best["metrics"]["accuracy"] == max(r["metrics"]["accuracy"] for r in grid["runs"])
    assert (result["learning_rate"], result["seed"]) == (best["learning_rate"], best["seed"])
    assert isinstance(result["degenerate"], bool)
    # Dev predictions re-score to the reported metrics with the evaluate CLI's scorer.
    dev = os.path.join(world[1], "glue_data/RTE/dev.tsv")
    rescored = evaluate.score_predictions_file("rte", dev, str(out / "dev_predictions.tsv"))
    assert rescored["accuracy"] == pytest.approx(result["metrics"]["accuracy"])
    submission = read_tsv("rte", str(out / "submission" / "RTE.tsv"))
    assert list(submission) == [str(i) for i in range(6)]
    assert (out / "run.log").read_text().count("run 4/4") >= 1
    # Every restart keeps its dev predictions, each re-scoring to its own metrics; the
    # gold labels are written once beside them.
    assert sorted(p.name for p in (out / "restarts").iterdir()) == [
        "gold", "lr0.0001-seed0", "lr0.0001-seed1", "lr0.001-seed0", "lr0.001-seed1"]
    for point in grid["runs"]:
        where = predictions.restart_dir(str(out), point["learning_rate"], point["seed"])
        rescored = evaluate.score_predictions_file(
            "rte", dev, os.path.join(where, "dev_predictions.tsv"))
        assert rescored["accuracy"] == pytest.approx(point["metrics"]["accuracy"])
    gold = read_tsv("rte", str(out / "restarts" / "gold" / "dev_labels.tsv"))
    assert list(gold) == [str(i) for i in range(10)]
    assert _restart_accuracies(out, result) == pytest.approx(
        [r["metrics"]["accuracy"] for r in statistics.picked_restarts(result)])

    # --first_seed adds restarts beyond that grid: seed 1 alone is the grid's seed 1.
    _, more = _main(world, tmp_path / "more", "rte", "--learning_rates", "1e-3",
                    "--first_seed", "1")
    [point] = more["grid"]["runs"]
    assert (point["learning_rate"], point["seed"]) == (1e-3, 1)
    assert point["metrics"] == grid["runs"][1]["metrics"]

    # Second run into the same directory: --overwrite moves the first run's outputs aside,
    # all together; every split comes from the feature cache, which stays.
    first = (out / "metrics.json").read_text()
    _, again = _main(world, tmp_path, "rte", "--overwrite")
    assert all(s["cached"] for s in again["featurization"].values())
    [aside] = out.glob("previous-*")
    assert (aside / "metrics.json").read_text() == first
    assert sorted(p.name for p in aside.iterdir()) == [
        "dev_predictions.tsv", "metrics.json", "restarts", "submission"]
    assert sorted(p.name for p in out.iterdir()) == [
        "cache", "dev_predictions.tsv", "metrics.json", aside.name, "restarts", "run.log",
        "submission"]
    # (relative to the output directory: bert_tf.portable_paths)
    assert again["outputs"] == ["dev_predictions.tsv", "restarts/gold/dev_labels.tsv",
                                "restarts/lr0.001-seed0/dev_predictions.tsv",
                                "submission/RTE.tsv"]


def _restart_accuracies(out, result, metric="accuracy"):
    """The picked restarts' metric on all examples, as reproduce.statistics recomputes it
    from the restarts/ files (it refuses files that disagree with the record)."""
    data = statistics.split_data({"result": result}, metric, str(out))
    assert len(data.keys) == result["eval_examples"][data.split]
    return list(data.full)


def _outputs(out) -> dict:
    """{relative path: bytes} of a run directory's outputs (not run.log or cache/)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*")
            if p.is_file() and p.name != "run.log" and "cache" not in p.relative_to(out).parts}


# Runs glue_suite.run as `python -m` does (run_name "__main__"); at exit, prints which of
# Keras's unused extras the run loaded, then whether they still import.
_AS_A_COMMAND = """
import atexit, importlib.util, runpy, sys
extras = [name for name in sys.argv[1].split(",") if name]
def report():
    print("loaded:", [n for n in extras if sys.modules.get(n) is not None])
    print("importable after:", all(importlib.util.find_spec(n) for n in extras))
atexit.register(report)
sys.argv = ["glue_suite.run", *sys.argv[2:]]
runpy.run_module("glue_suite.run", run_name="__main__", alter_sys=True)
"""


def test_the_command_runs_without_keras_extras(world, tmp_path):
    """`python -m glue_suite.run` imports Keras without scikit-learn, pandas, matplotlib
    and IPython (seconds of start-up), trains and scores all the same, and leaves them
    importable."""
    installed = [n for n in KERAS_EXTRAS_UNUSED if importlib.util.find_spec(n)]
    out = tmp_path / "rte"
    done = subprocess.run(
        [sys.executable, "-c", _AS_A_COMMAND, ",".join(installed),
         *_argv(world, out, "rte")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: []\nimportable after: True" in done.stdout
    with open(out / "metrics.json", encoding="utf-8") as f:
        _check_common(json.load(f), "rte", 24)


def test_a_finished_run_is_refused_or_kept_whole(world, tmp_path, monkeypatch, capsys):
    """A reused directory: refused without --overwrite; with it, a run that fails after
    writing its predictions leaves the previous metrics.json and predictions as they were."""
    out, _ = _main(world, tmp_path, "rte", "--no_test_predictions")
    before = _outputs(out)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_main(run.main, _argv(world, out, "rte", "--learning_rates", "1e-4"))
    errors = [line for line in capsys.readouterr().err.splitlines()
              if line.startswith("error: ")]
    assert exit_.value.code == 2 and errors == [
        f"error: {out / 'metrics.json'}: holds a finished run (rte); pass --overwrite to move "
        f"its outputs to {out / 'previous-'}<time>/ once the new run's are complete, or "
        f"choose another --output_dir"]

    def fail_after_predictions(*args, **kwargs):
        assert list((out / ".staging").glob("dev_predictions.tsv"))  # written, not in place
        raise RuntimeError("injected failure")
    monkeypatch.setattr(run.outputs, "result_record", fail_after_predictions)
    with pytest.raises(RuntimeError, match="injected failure"):
        run.main(_argv(world, out, "rte", "--no_test_predictions", "--overwrite",
                       "--learning_rates", "1e-4"))
    progress = out / "grid_progress"  # the failed run's finished grid, for a rerun
    assert (progress / "restarts" / "lr0.0001-seed0" / "point.json").exists()
    shutil.rmtree(progress)
    assert _outputs(out) == before
    assert not list(out.glob("previous-*")) and not (out / ".staging").exists()


def assert_same_grid(result, reference):
    runs, expected = result["grid"]["runs"], reference["grid"]["runs"]
    assert [(r["learning_rate"], r["seed"]) for r in runs] == [
        (r["learning_rate"], r["seed"]) for r in expected]
    for run_, expected_run in zip(runs, expected):
        assert run_["metrics"] == pytest.approx(expected_run["metrics"])


def test_a_stopped_grid_resumes_from_its_finished_points(world, tmp_path, monkeypatch):
    """Stopped during its second grid point, the same command trains only that point;
    stopped after its grid (outputs not written yet), it trains none and, where its test
    predictions need the best model, rebuilds it from its saved weights (without them no
    weights are saved: the points' predictions are the outputs). Each ends as the
    uninterrupted run does. Another setting trains every point again."""
    grid = ("--learning_rates", "1e-3,1e-4", "--no_test_predictions")
    _, reference = _main(world, tmp_path, "rte", *grid)
    calls = {"fine_tune": 0, "restore_model": 0}
    for name in calls:
        def counted(*args, _name=name, _original=getattr(run.finetune, name), **kwargs):
            calls[_name] += 1
            if calls[_name] == stop_at.get(_name):
                raise KeyboardInterrupt  # as Ctrl-C or SIGTERM in the middle of it
            return _original(*args, **kwargs)
        monkeypatch.setattr(run.finetune, name, counted)

    stop_at = {"fine_tune": 2}
    out = tmp_path / "stopped_in_grid"
    with pytest.raises(KeyboardInterrupt):
        run.main(_argv(world, out, "rte", *grid))
    assert len(list(out.glob("grid_progress/restarts/*/point.json"))) == 1
    assert not (out / "metrics.json").exists()
    stop_at, calls["fine_tune"] = {}, 0
    assert run.main(_argv(world, out, "rte", *grid)) == 0
    resumed = json.loads((out / "metrics.json").read_text())
    assert calls["fine_tune"] == 1  # the second point
    assert [bool(r.get("resumed")) for r in resumed["grid"]["runs"]] == [True, False]
    assert_same_grid(resumed, reference)
    assert (out / "run.log").read_text().count("finished by an earlier run") == 1
    assert not (out / "grid_progress").exists()
    assert sorted(p.name for p in (out / "restarts").iterdir()) == sorted(
        p.name for p in (tmp_path / "rte" / "restarts").iterdir())

    def fail_once(*args, **kwargs):
        monkeypatch.setattr(run, "write_outputs", write_outputs)
        raise KeyboardInterrupt
    write_outputs = run.write_outputs
    for name, flags, weights, restored in (("stopped_after_grid", grid, [], 0),
                                           ("stopped_before_test", grid[:2], ["best"], 1)):
        out = tmp_path / name
        monkeypatch.setattr(run, "write_outputs", fail_once)
        with pytest.raises(KeyboardInterrupt):
            run.main(_argv(world, out, "rte", *flags))
        assert [p.name.split("-")[0] for p in (out / "grid_progress").glob("*.h5")] == weights
        calls.update(fine_tune=0, restore_model=0)
        assert run.main(_argv(world, out, "rte", *flags)) == 0
        resumed = json.loads((out / "metrics.json").read_text())
        assert calls == {"fine_tune": 0, "restore_model": restored}
        assert_same_grid(resumed, reference)
        assert resumed["metrics"] == pytest.approx(reference["metrics"])
        assert (out / "dev_predictions.tsv").read_text() == \
            (tmp_path / "rte" / "dev_predictions.tsv").read_text()
    assert (out / "submission" / "RTE.tsv").exists()  # written by the rebuilt best

    # Points trained with other settings are not taken: the progress is discarded.
    out, stop_at = tmp_path / "other_settings", {"fine_tune": calls["fine_tune"] + 2}
    with pytest.raises(KeyboardInterrupt):
        run.main(_argv(world, out, "rte", *grid))
    calls["fine_tune"], stop_at = 0, {}
    assert run.main(_argv(world, out, "rte", *grid, "--weight_decay", "0.02")) == 0
    assert calls["fine_tune"] == 2
    assert "discarded the grid progress" in (out / "run.log").read_text()


def test_points_finished_elsewhere_are_taken_and_a_best_without_weights_keeps_its_outputs(
        world, tmp_path, monkeypatch):
    """Points another machine finished, added to a fresh directory's grid under the
    identity the command computes (as reproduce.partial does), are not trained again; the
    best of them has no weights here, so the dev outputs are its restart's predictions:
    the same files and metrics as the uninterrupted run's."""
    grid = ("--learning_rates", "1e-3,1e-4", "--no_test_predictions")
    _, reference = _main(world, tmp_path, "rte", *grid)
    elsewhere = tmp_path / "elsewhere"  # stopped after its grid: both points finished

    def stop(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(run, "write_outputs", stop)
    with pytest.raises(KeyboardInterrupt):
        run.main(_argv(world, elsewhere, "rte", *grid))
    monkeypatch.undo()

    out = tmp_path / "here"
    argv = _argv(world, out, "rte", *grid)
    progress = GridProgress(str(out), run.grid_identity_of(argv))
    points = finished_point_dirs(str(elsewhere))
    assert [os.path.basename(p) for p in points] == ["lr0.0001-seed0", "lr0.001-seed0"]
    assert [progress.add(p) for p in points] == [True, True]
    assert progress.add(points[0]) is False  # there already
    calls = []
    for name in ("fine_tune", "restore_model"):
        monkeypatch.setattr(run.finetune, name, lambda *a, _n=name, **k: calls.append(_n))
    assert run.main(argv) == 0
    assert calls == []
    taken = json.loads((out / "metrics.json").read_text())
    assert [r.get("resumed") for r in taken["grid"]["runs"]] == [True, True]
    assert_same_grid(taken, reference)
    assert taken["metrics"] == pytest.approx(reference["metrics"])
    assert (out / "dev_predictions.tsv").read_text() == \
        (tmp_path / "rte" / "dev_predictions.tsv").read_text()
    assert "its dev outputs are its restart's predictions" in (out / "run.log").read_text()


def test_the_harness_keeps_finished_restarts_and_another_machine_goes_on_from_them(
        world, tmp_path):
    """reproduce.partial: a fine-tuning run stopped after its first restart has that
    restart beside its record; with the work dir gone (another machine), the harness
    adds it to the run's grid, the run trains only the second, and the finished record
    names the restart it took and drops the kept copy."""
    grid = ("--learning_rates", "1e-3,1e-4", "--no_test_predictions")
    work, results = tmp_path / "work" / "rte", str(tmp_path / "results")
    command = Run("t.finetune.rte", "finetune", "glue_suite.run",
                  tuple(_argv(world, work, "rte", *grid)), str(work),
                  cells=(Cell("table1", "BERT-BASE", "RTE", "accuracy"),),
                  info={"task": "rte"})
    plan = Plan("smoke", "cpu", {command.run_id: command}, data_dir=world[1])
    kept = pathlib.Path(results) / "runs" / command.run_id / "partial"
    first = work / "grid_progress" / "restarts" / "lr0.001-seed0" / "point.json"
    run_plan_stopped_once(first, plan, results, world[1], timeout_s=300)
    index = json.loads((kept / "partial.json").read_text())
    assert list(index["restarts"]) == ["lr0.001-seed0"]
    assert index["argv"][index["argv"].index("--data_dir") + 1] == "$BERT_DATA_DIR"
    assert (kept / "restarts" / "lr0.001-seed0" / "dev_predictions.tsv").exists()
    printed = io.StringIO()
    kept_names = partial.kept_restarts(plan, results)
    partial.print_kept(kept_names, printed)  # under the printed plan
    assert printed.getvalue().startswith(
        "t.finetune.rte: 1 restart(s) done in earlier sittings (lr0.001-seed0; ")

    shutil.rmtree(work)
    assert run_plan(plan, results, world[1], echo=False) == {command.run_id: "finished"}
    record = load_record(results, command.run_id)
    assert list(record["adopted_restarts"]) == ["lr0.001-seed0"]
    assert [bool(r.get("resumed")) for r in record["result"]["grid"]["runs"]] == [True, False]
    assert sorted(os.listdir(kept.parent / "files" / "restarts")) == [
        "lr0.0001-seed0", "lr0.001-seed0"]
    assert not kept.exists()


def test_regression_and_two_dev_sets(world, tmp_path):
    out, result = _main(world, tmp_path, "stsb")
    _check_common(result, "stsb", 24)
    dev = os.path.join(world[1], "glue_data/STS-B/dev.tsv")
    rescored = evaluate.score_predictions_file("stsb", dev, str(out / "dev_predictions.tsv"))
    assert rescored["spearman"] == pytest.approx(result["metrics"]["spearman"])
    assert (out / "submission" / "STS-B.tsv").exists()

    out, result = _main(world, tmp_path, "mnli", "--max_train_examples", "10")
    assert result["train_examples"] == 10 and result["max_train_examples"] == 10
    assert {"accuracy", "dev_mismatched_accuracy"} <= set(result["metrics"])
    assert (out / "dev_matched_predictions.tsv").exists()
    assert (out / "dev_mismatched_predictions.tsv").exists()
    assert (out / "submission" / "AX.tsv").exists()  # MNLI test files are absent
    assert _restart_accuracies(out, result, "dev_mismatched_accuracy") == pytest.approx(
        [result["metrics"]["dev_mismatched_accuracy"]])


@pytest.mark.parametrize("task,train_task", [("squad1.1", None), ("squad2.0", None),
                                             ("squad2.0", "squad1.1")])
def test_span_end_to_end(world, tmp_path, task, train_task):
    extra = ["--train_task", train_task] if train_task else []
    out, result = _main(world, tmp_path, task, "--max_seq_length", "32", "--doc_stride", "8",
                        "--max_query_length", "8", *extra)
    _check_common(result, task, 12)
    assert result["train_task"] == (train_task or task)
    assert f"/squad/v{(train_task or task)[5:]}/train" in result["data_files"]["train"]
    assert result["train_features"] > result["train_examples"]  # several windows each
    predictions = json.loads((out / "predictions.json").read_text())
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert len(predictions) == len(nbest) == 6
    data = os.path.join(world[1], "squad", "v1.1" if task == "squad1.1" else "v2.0",
                        f"dev-v{task[5:]}.json")
    if task == "squad1.1":
        assert set(result["metrics"]) == {"exact_match", "f1"}
        rescored = evaluate.score_squad(task, data, str(out / "predictions.json"))
        assert rescored["f1"] == pytest.approx(result["metrics"]["f1"])
    else:
        assert {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"} <= set(
            result["metrics"])
        # The official scorer on predictions.json + null_odds.json gives the same numbers.
        rescored = evaluate.score_squad(task, data, str(out / "predictions.json"),
                                        str(out / "null_odds.json"), na_prob_thresh=0.0)
        for key in ("exact", "f1", "HasAns_f1", "NoAns_f1"):
            assert rescored[key] == pytest.approx(result["metrics"][key])
        best = evaluate.score_squad(task, data, str(out / "predictions_best_threshold.json"))
        assert best["f1"] == pytest.approx(result["metrics"]["best_f1"])
    # The restart's files give every metric the tables use, as the run computed it.
    restart = sorted(p.name for p in (out / "restarts" / "lr0.001-seed0").iterdir())
    assert restart == (["predictions.json"] if task == "squad1.1" else
                       ["best_non_null_predictions.json", "null_odds.json"])
    for metric in (("exact_match", "f1") if task == "squad1.1" else
                   ("exact", "f1", "best_exact", "best_f1")):
        assert _restart_accuracies(out, result, metric) == pytest.approx(
            [result["metrics"][metric]])


def test_multiple_choice_and_token_end_to_end(world, tmp_path):
    out, result = _main(world, tmp_path, "swag", "--precision", "mixed_bfloat16")
    _check_common(result, "swag", 12)
    val = os.path.join(world[1], "swag/val.csv")
    rescored = evaluate.score_predictions_file("swag", val, str(out / "dev_predictions.tsv"))
    assert rescored["accuracy"] == pytest.approx(result["metrics"]["accuracy"])

    out, result = _main(world, tmp_path, "conll2003")
    _check_common(result, "conll2003", 9)
    assert {"ner_f1", "ner_precision", "ner_recall", "test_ner_f1"} <= set(result["metrics"])
    lines = (out / "dev_predictions.txt").read_text().split("\n\n")
    assert len([s for s in lines if s.strip()]) == 6  # 2 documents x 3 sentences
    tags = predictions.read_tag_lines(str(out / "restarts" / "lr0.001-seed0" / "dev_tags.txt"))
    assert [len(t) for t in tags] == [len(s.strip().split("\n")) for s in lines if s.strip()]
    for metric in ("ner_f1", "test_ner_f1"):
        assert _restart_accuracies(out, result, metric) == pytest.approx(
            [result["metrics"][metric]])


@pytest.mark.parametrize("task,extra", [("rte", ()), ("squad1.1", (
    "--max_seq_length", "32", "--doc_stride", "8", "--max_query_length", "8"))])
def test_bilstm_head_end_to_end(world, tmp_path, task, extra):
    out, result = _main(world, tmp_path, task, "--head", "bilstm", "--bilstm_units", "8", *extra)
    _check_common(result, task, 24 if task == "rte" else 12)
    train = result["config"]["train"]
    assert (train["head"], train["bilstm_units"]) == ("bilstm", 8)
    assert train["feature_mode"] is None
    assert (out / ("dev_predictions.tsv" if task == "rte" else "predictions.json")).exists()


def test_feature_mode_end_to_end(world, tmp_path, monkeypatch):
    """The frozen encoder reads each split once; 2 seeds x 2 epochs train on its layers;
    a run of another mode with the same --cache_dir reads them from there."""
    from glue_suite import frozen_features
    passes, encoder_pass = [], frozen_features.encoder_pass

    def counted_pass(encoder, features, *args):
        passes.append(len(features["input_ids"]))
        return encoder_pass(encoder, features, *args)

    monkeypatch.setattr(frozen_features, "encoder_pass", counted_pass)
    out, result = _main(world, tmp_path, "conll2003", "--feature_mode", "weighted_sum_all",
                        "--bilstm_units", "8", "--seeds", "2", "--epochs", "2")
    _check_common(result, "conll2003", 9)
    assert result["config"]["train"]["feature_mode"] == "weighted_sum_all"
    assert {"ner_f1", "test_ner_f1"} <= set(result["metrics"])
    assert (out / "dev_predictions.txt").exists()
    splits = ("train", "dev", "test")
    assert sorted(passes) == sorted(result["featurization"][s]["features"] for s in splits)
    for split in splits:
        stats = result["featurization"][split]["frozen_layers"]
        assert stats["layers"] == [0, 1, 2] and not stats["from_disk"]  # L + 1 = 3
    assert result["timings"]["frozen_layers"] > 0
    assert [len(r["train"]["loss"]) for r in result["grid"]["runs"]] == [2, 2]

    _, again = _main(world, tmp_path / "again", "conll2003", "--feature_mode", "last",
                     "--bilstm_units", "8", "--cache_dir", str(out / "cache"))
    assert len(passes) == 3  # no encoder pass
    assert all(again["featurization"][s]["frozen_layers"]["from_disk"] for s in splits)
    assert again["featurization"]["train"]["frozen_layers"]["layers"] == [2]


@pytest.mark.parametrize("extra,message", [
    (("--task", "rte", "--feature_mode", "last"), "needs a token task (conll2003), not rte"),
    (("--task", "conll2003", "--feature_mode", "last", "--head", "bilstm"), "do not pass --head")])
def test_feature_mode_errors(world, tmp_path, capsys, extra, message):
    code = run.main([*extra, "--init_checkpoint", world[0], "--data_dir", world[1],
                     "--output_dir", str(tmp_path / "out")])
    assert code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("task,missing", [("qnli", "glue_data/QNLI/train.tsv"),
                                          ("qqp", "glue_data/QQP/train.tsv")])
def test_missing_training_data_is_one_clear_error(world, tmp_path, capsys, task, missing):
    checkpoint, data = world
    with pytest.raises(SystemExit) as exit_:
        run_main(run.main, ["--task", task, "--init_checkpoint", checkpoint, "--data_dir",
                            data, "--output_dir", str(tmp_path / task)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert missing in err and "gluebenchmark.com" in err and "Traceback" not in err


def test_squad2_without_training_data_suggests_train_task(world, tmp_path, capsys):
    checkpoint, _ = world
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit) as exit_:
        run_main(run.main, ["--task", "squad2.0", "--init_checkpoint", checkpoint,
                            "--data_dir", str(empty), "--output_dir", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "train-v2.0.json" in err and "--train_task squad1.1" in err


def test_flags_resolve_to_the_paper_defaults(monkeypatch):
    monkeypatch.setenv("BERT_DATA_DIR", "/somewhere")
    config = run_config.resolve_config(run.build_parser().parse_args(["--task", "rte"]))
    assert (config.train.batch_size, config.train.epochs, config.features.max_seq_length) == (
        32, 3, 128)
    assert config.seeds == (0,)
    # The grid follows the checkpoint's size: the paper's for Base/Large, Turc et al.'s
    # (without 3e-4) for smaller models; --learning_rates overrides both.
    assert config.learning_rates is None
    base, small = (run_config.with_default_grid(config, h) for h in (768, 384))
    assert base.learning_rates == (5e-5, 4e-5, 3e-5, 2e-5) and "paper" in base.learning_rate_grid
    assert small.learning_rates == (1e-4, 5e-5, 3e-5) and "Turc" in small.learning_rate_grid
    given = run_config.resolve_config(run.build_parser().parse_args(
        ["--task", "rte", "--learning_rates", "2e-4"]))
    assert run_config.with_default_grid(given, 384).learning_rates == (2e-4,)
    assert config.data_dir == "/somewhere" and config.output_dir == os.path.join("runs", "rte")
    assert config.init_checkpoint is None  # the shipped default checkpoint
    # XLA off unless asked (Keras's "auto" would turn it on: 5.4x slower end to end on
    # SST-2 here, recompiling every length bucket).
    assert config.train.jit_compile is False
    assert run_config.resolve_config(run.build_parser().parse_args(
        ["--task", "rte", "--jit_compile"])).train.jit_compile is True
    assert (config.train.warmup_proportion, config.train.weight_decay,
            config.train.dropout) == (0.1, 0.01, 0.1)
    squad2 = run_config.resolve_config(run.build_parser().parse_args(["--task", "squad2.0"]))
    assert (squad2.train.batch_size, squad2.train.epochs,
            run_config.with_default_grid(squad2, 384).learning_rates) == (48, 2, (5e-5,))
    assert squad2.features == F.FeatureSettings(384, 128, 64)
    swag = run_config.resolve_config(run.build_parser().parse_args(["--task", "swag"]))
    assert (swag.train.batch_size, swag.train.epochs,
            run_config.with_default_grid(swag, 384).learning_rates) == (16, 3, (2e-5,))
    with pytest.raises(ValueError, match="cannot train"):
        run_config.resolve_config(run.build_parser().parse_args(["--task", "rte",
                                                                 "--train_task", "mnli"]))


def test_tfds_source_end_to_end(world, tmp_path):
    """--source tfds under tfds.testing.mock_data (no network)."""
    tf = pytest.importorskip("tensorflow")
    tfds = pytest.importorskip("tensorflow_datasets")
    rng = np.random.default_rng(1)
    records = {split: [{"sentence1": _sentence(rng).encode(), "sentence2": _sentence(rng).encode(),
                        "label": np.int64(-1 if split == "test" else i % 2), "idx": np.int32(i)}
                       for i in range(n)]
               for split, n in (("train", 12), ("validation", 6), ("test", 4))}

    def as_dataset(builder, split, *args, **kwargs):
        rows = records[str(split)]
        signature = {k: tf.TensorSpec([], tf.as_dtype(np.asarray(v).dtype))
                     for k, v in rows[0].items()}
        return tf.data.Dataset.from_generator(lambda: iter(rows), output_signature=signature)

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        out, result = _main(world, tmp_path, "rte", "--source", "tfds")
    assert result["data_files"] == {"train": "tfds:glue/rte[train]",
                                    "dev": "tfds:glue/rte[validation]",
                                    "test": "tfds:glue/rte[test]"}
    assert result["train_examples"] == 12 and result["eval_examples"] == {"dev": 6}
    assert read_tsv("rte", str(out / "submission" / "RTE.tsv")).keys() == {
        "0", "1", "2", "3"}
