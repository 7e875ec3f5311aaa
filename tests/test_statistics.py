"""reproduce.statistics: each scorer against scikit-learn, scipy, seqeval or the official
SQuAD scores on resampled examples; the bootstrap against scipy.stats.bootstrap (one
restart, restarts pooled, paired and unpaired differences); a cell read from a
synthetic record's restarts/ files, its gold beside them or in the data it names."""

import json
import math
import shutil
import warnings

import numpy as np
import scipy.stats
import pytest
from scipy import stats
from sklearn import metrics as skm

from glue_suite import predictions, squad_eval
from glue_suite.metrics import entity_f1
from glue_suite.readers import InputExample, NerSentence
from glue_suite.squad_readers import SquadExample
from glue_suite.tasks import get_task
from reproduce import statistics
from reproduce.statistics import Estimate, SplitData

def _indices(n, resamples=5, seed=1):
    return np.random.default_rng(seed).integers(0, n, (resamples, n))


# ---------------------------------------------------------------------------- scorers
@pytest.mark.parametrize("task,metric,reference", [
    ("mnli", "accuracy", skm.accuracy_score),
    ("mrpc", "f1", skm.f1_score),
    ("cola", "mcc", skm.matthews_corrcoef)])
def test_classification_scorers_match_sklearn_on_resamples(task, metric, reference):
    rng = np.random.default_rng(10)
    classes = len(get_task(task).labels)
    gold = rng.integers(0, classes, 300)
    predicted = np.where(rng.random(300) < 0.7, gold, rng.integers(0, classes, 300))
    indices = _indices(300)
    ours = statistics.glue_scorer(task, metric, predicted, gold)(indices)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [100 * reference(gold[row], predicted[row]) for row in indices]
    np.testing.assert_allclose(ours, expected, rtol=1e-9)
    assert len(set(np.round(ours, 6))) > 1  # the resamples differ


@pytest.mark.parametrize("metric,reference", [("pearson", stats.pearsonr),
                                              ("spearman", stats.spearmanr)])
def test_regression_scorers_match_scipy_on_resamples(metric, reference):
    rng = np.random.default_rng(11)
    gold = np.round(rng.uniform(0, 5, 200), 1)  # ties, as STS-B has
    predicted = gold + rng.normal(0, 1.0, 200)
    indices = _indices(200)
    ours = statistics.glue_scorer("stsb", metric, predicted, gold)(indices)
    expected = [100 * reference(predicted[row], gold[row])[0] for row in indices]
    np.testing.assert_allclose(ours, expected, rtol=1e-6)


def _sentences(n, seed=2):
    rng = np.random.default_rng(seed)
    labels = get_task("conll2003").labels
    gold, predicted = [], []
    for _ in range(n):
        length = int(rng.integers(1, 12))
        tags, prev = [], "O"
        for _ in range(length):  # valid BIO gold
            tag = str(rng.choice(labels))
            if tag.startswith("I-") and prev[2:] != tag[2:]:
                tag = "B-" + tag[2:]
            tags.append(tag)
            prev = tag
        gold.append(tags)
        predicted.append([t if rng.random() < 0.8 else str(rng.choice(labels)) for t in tags])
    return gold, predicted


@pytest.mark.parametrize("metric", ["ner_f1", "ner_precision", "ner_recall"])
def test_ner_scorer_matches_entity_f1_and_seqeval_on_resampled_sentences(metric):
    gold, predicted = _sentences(120)
    indices = _indices(120)
    ours = statistics.ner_scorer(metric, gold, predicted)(indices)
    key = metric[len("ner_"):]
    expected = [entity_f1([gold[i] for i in row], [predicted[i] for i in row])[key]
                for row in indices]
    np.testing.assert_allclose(ours, expected, rtol=1e-9)
    seqeval = pytest.importorskip("seqeval.metrics")
    function = {"f1": seqeval.f1_score, "precision": seqeval.precision_score,
                "recall": seqeval.recall_score}[key]
    row = indices[0]
    assert ours[0] == pytest.approx(100 * function([gold[i] for i in row],
                                                   [predicted[i] for i in row]), rel=1e-6)


def _squad_case(n, version_2, seed=3):
    """Questions with 1-3 gold answers (v2.0: a third unanswerable), predictions that
    match, overlap or miss them; v2.0 null odds with ties."""
    rng = np.random.default_rng(seed)
    words = "the a red blue dog cat paris london , . big small".split()
    answers, predicted = [], []
    for i in range(n):
        if version_2 and i % 3 == 0:
            answers.append([])
        else:
            answers.append([" ".join(rng.choice(words, int(rng.integers(1, 4))))
                            for _ in range(int(rng.integers(1, 4)))])
        roll = rng.random()
        predicted.append(answers[-1][0] if answers[-1] and roll < 0.4 else
                         "" if version_2 and roll < 0.5 else
                         " ".join(rng.choice(words, int(rng.integers(1, 4)))))
    odds = list(np.round(rng.normal(0, 1, n), 1))  # rounded: ties in the search order
    return answers, predicted, odds


def _dataset(answers, rows):
    """A SQuAD `data` list of the resampled questions, repeats renamed apart."""
    qas = [{"id": f"q{i}#{k}", "answers": [{"text": a} for a in answers[i]]}
           for k, i in enumerate(rows)]
    return [{"paragraphs": [{"qas": qas}]}]


def test_squad_v1_scorer_matches_the_official_score_on_resamples():
    answers, predicted, _ = _squad_case(80, version_2=False)
    predicted[5] = None  # a missing prediction scores 0
    indices = _indices(80)
    for metric in ("exact_match", "f1"):
        ours = statistics.squad_v1_scorer(metric, answers, predicted)(indices)
        for value, row in zip(ours, indices):
            given = {f"q{i}#{k}": predicted[i] for k, i in enumerate(row)
                     if predicted[i] is not None}
            expected = squad_eval.evaluate_v1(_dataset(answers, row), given)[metric]
            assert value == pytest.approx(expected, rel=1e-9)


def test_squad_v2_scorer_matches_the_official_score_and_threshold_search():
    answers, best_non_null, odds = _squad_case(90, version_2=True)
    best_non_null = [t or "dog" for t in best_non_null]  # the span head always answers
    best_non_null[7] = ""  # ... unless no span was valid
    # The official search goes through questions by null odds, ties in file order: the
    # dataset lists a resample's questions in example order, repeats together.
    indices = np.sort(_indices(90, resamples=4), axis=1)
    for metric in ("exact", "f1", "best_exact", "best_f1"):
        ours = statistics.squad_v2_scorer(metric, answers, best_non_null, odds, -0.5)(indices)
        for value, row in zip(ours, indices):
            ids = [f"q{i}#{k}" for k, i in enumerate(row)]
            official = squad_eval.evaluate_v2(
                _dataset(answers, row), dict(zip(ids, (best_non_null[i] for i in row))),
                dict(zip(ids, (odds[i] for i in row))), na_prob_thresh=-0.5)
            assert value == pytest.approx(official[metric], rel=1e-9), metric
    with pytest.raises(statistics.Unavailable, match="HasAns_f1"):
        statistics.squad_v2_scorer("HasAns_f1", answers, best_non_null, odds, 0.0)


# -------------------------------------------------------------------------- bootstrap
def _cell(hits_per_restart, keys=None, task="mnli", split="dev_matched", resamples=4000,
          name="cell"):
    """An Estimate of accuracy from per-restart hit vectors (1 = correct)."""
    n = len(hits_per_restart[0])
    gold = np.zeros(n, np.int64)
    scorers = tuple(statistics.glue_scorer(task, "accuracy", 1 - np.asarray(h), gold)
                    for h in hits_per_restart)
    data = SplitData(task, split, tuple(keys or (str(i) for i in range(n))), scorers,
                     tuple(100 * np.mean(h) for h in hits_per_restart))
    return Estimate(float(np.mean(data.full)), statistics.bootstrap(data, name, resamples))


def _scipy_interval(samples, statistic, paired):
    result = stats.bootstrap(samples, statistic, paired=paired, vectorized=True,
                             n_resamples=4000, method="percentile", confidence_level=0.95,
                             rng=np.random.default_rng(7))
    return result.confidence_interval.low, result.confidence_interval.high


def test_one_restart_matches_scipy_bootstrap_and_the_normal_interval():
    rng = np.random.default_rng(12)
    hits = (rng.random(400) < 0.7).astype(float)
    low, high = _cell([hits]).interval()
    ref_low, ref_high = _scipy_interval((100 * hits,), lambda x, axis: x.mean(axis), False)
    assert low == pytest.approx(ref_low, abs=0.4) and high == pytest.approx(ref_high, abs=0.4)
    p = hits.mean()
    half = 100 * 1.96 * math.sqrt(p * (1 - p) / len(hits))
    assert low == pytest.approx(100 * p - half, abs=0.6)
    assert high == pytest.approx(100 * p + half, abs=0.6)


def _two_level_interval(hits_per_restart, resamples=4000, seed=3):
    """The multi-bootstrap written out loop by loop: examples, then restarts, drawn with
    replacement; the drawn restarts' mean accuracy on the drawn examples."""
    rng = np.random.default_rng(seed)
    hits = 100 * np.asarray(hits_per_restart)
    k, n = hits.shape
    means = []
    for _ in range(resamples):
        examples = rng.integers(0, n, n)
        restarts = rng.integers(0, k, k)
        means.append(np.mean([hits[r, examples].mean() for r in restarts]))
    return tuple(np.percentile(means, [2.5, 97.5]))


def test_restarts_share_their_examples_and_are_resampled_too():
    rng = np.random.default_rng(13)
    first = (rng.random(300) < 0.6).astype(float)
    second = np.where(rng.random(300) < 0.9, first, 1 - first)  # mostly the same errors
    third = np.where(rng.random(300) < 0.25, 1.0, first)  # an easier restart: +~10 points
    hits = [first, second, third]
    low, high = _cell(hits).interval()
    ref = _two_level_interval(hits)
    # Two Monte Carlo estimates of a percentile, 4,000 draws each: they differ by ~0.06
    # standard deviations of the replicates (~0.015 widths); 0.08 widths is ~5 sigma.
    assert (low, high) == pytest.approx(ref, abs=0.08 * (ref[1] - ref[0]))
    # Over examples alone (the restarts kept together) the interval would be narrower:
    # the restarts' disagreement adds to it.
    examples_only = _scipy_interval(
        tuple(100 * h for h in hits), lambda a, b, c, axis: (a.mean(axis) + b.mean(axis)
                                                            + c.mean(axis)) / 3, True)
    assert high - low > 1.2 * (examples_only[1] - examples_only[0])
    # Identical restarts add nothing: the interval of one of them.
    assert _cell([first, first, first]).interval() == pytest.approx(
        _cell([first]).interval(), abs=0.3)
    # The restart draws are the cell's own: seeded by its name, the same every time.
    again = _cell(hits)
    assert (again.interval() == (low, high)) and _cell(hits, name="other").interval() != (low, high)


def test_paired_and_unpaired_differences_match_scipy():
    rng = np.random.default_rng(14)
    a = (rng.random(500) < 0.75).astype(float)
    b = np.where(rng.random(500) < 0.93, a, 1 - a)  # a correlated second system
    def difference(x, y, axis):
        return x.mean(axis) - y.mean(axis)

    paired = statistics.difference(_cell([a]), _cell([b]))
    assert paired.value == pytest.approx(100 * (a.mean() - b.mean()))
    ref = _scipy_interval((100 * a, 100 * b), difference, True)
    assert paired.interval() == pytest.approx(ref, abs=0.3)
    # Other examples (here: other keys) are drawn independently: an unpaired interval,
    # much wider for correlated systems.
    other = _cell([b], keys=[f"x{i}" for i in range(500)])
    unpaired = statistics.difference(_cell([a]), other)
    ref = _scipy_interval((100 * a, 100 * b), difference, False)
    assert unpaired.interval() == pytest.approx(ref, abs=0.5)
    widths = [e.interval()[1] - e.interval()[0] for e in (paired, unpaired)]
    assert widths[1] > 1.8 * widths[0]


def test_indices_depend_on_the_examples_only():
    keys = [f"mnli/dev/{i}" for i in range(50)]
    first = np.concatenate(list(statistics.resample_indices(keys, 250)))
    again = np.concatenate(list(statistics.resample_indices(list(keys), 250)))
    other = np.concatenate(list(statistics.resample_indices(keys[:-1] + ["x"], 250)))
    assert first.shape == (250, 50) and (first == again).all() and (first != other).any()
    assert 0 <= first.min() and first.max() == 49


def test_maximum_is_taken_per_resample_and_reasons_carry_over():
    a = Estimate(1.0, np.array([1.0, 5.0, 2.0]))
    b = Estimate(2.0, np.array([3.0, 0.0, 2.5]))
    best = statistics.maximum([a, b])
    assert best.value == 2.0 and list(best.replicates) == [3.0, 5.0, 2.5]
    none = Estimate(4.0, None, "no files")
    assert statistics.maximum([a, none]).reason == "no files"
    assert math.isnan(statistics.difference(a, none).interval()[0])
    assert math.isnan(Estimate(1.0, np.array([1.0, np.nan])).interval()[0])


# -------------------------------------------------------------- cells from a record
def _write_glue_run(files_dir, task, gold, runs, split="dev"):
    """restarts/ files of a synthetic `task` run; `runs`: (lr, seed, predicted ids)."""
    spec = get_task(task)
    examples = [InputExample(str(i), "a", "b", spec.labels[g]) for i, g in enumerate(gold)]
    predictions.write_gold(spec, split, examples, str(files_dir))
    grid_runs = []
    for lr, seed, predicted in runs:
        where = predictions.restart_dir(str(files_dir), lr, seed)
        predictions.write_restart(spec, split, examples, np.asarray(predicted), where)
        grid_runs.append({"learning_rate": lr, "seed": seed, "metrics": {
            "accuracy": 100 * float(np.mean(np.asarray(predicted) == gold)),
            "f1": 100 * skm.f1_score(gold, predicted)}})
    return grid_runs


def _grid_record(run_id, task, grid_runs, best_lr):
    picked = [r["metrics"]["accuracy"] for r in grid_runs if r["learning_rate"] == best_lr]
    group = {"learning_rate": best_lr, "runs": len(picked),
             "mean": {"accuracy": float(np.mean(picked))},
             "std": {"accuracy": float(np.std(picked, ddof=1))}}
    return {"run_id": run_id, "stage": "finetune", "status": "finished",
            "metrics": grid_runs[0]["metrics"],
            "result": {"task": task, "grid": {"best_learning_rate": best_lr, "runs": grid_runs,
                                              "by_learning_rate": [group]}}}


def test_a_cell_pools_the_picked_restarts_and_checks_them_against_the_record(tmp_path):
    rng = np.random.default_rng(15)
    files_dir = tmp_path / "runs" / "r" / "files"
    gold = rng.integers(0, 2, 200)
    grid_runs = _write_glue_run(files_dir, "mrpc", gold, [
        (lr, seed, np.where(rng.random(200) < p, gold, 1 - gold))
        for lr, seed, p in ((1e-4, 0, 0.8), (1e-4, 1, 0.7), (5e-5, 0, 0.5))])
    record = _grid_record("r", "mrpc", grid_runs, 1e-4)
    estimate = statistics.estimate(record, "accuracy", str(tmp_path))
    assert estimate.value == pytest.approx(np.mean([r["metrics"]["accuracy"]
                                                    for r in grid_runs[:2]]))
    low, high = estimate.interval()
    assert low < estimate.value < high and high - low < 15
    assert statistics.estimate(record, "f1", str(tmp_path)).replicates.shape == (1000,)
    # The same record and files give the same interval (seeded by the examples).
    assert statistics.estimate(record, "accuracy", str(tmp_path)).interval() == (low, high)

    # A restart whose files disagree with its record is refused, with the reason.
    record["result"]["grid"]["runs"][1]["metrics"]["accuracy"] += 0.5
    refused = statistics.estimate(record, "accuracy", str(tmp_path))
    assert refused.replicates is None and "lr 0.0001 seed 1" in refused.reason
    # A record without restarts/ keeps its number and says why it has no interval.
    bare = statistics.estimate({**record, "run_id": "other"}, "accuracy", str(tmp_path))
    assert bare.value == estimate.value and "no restarts/" in bare.reason
    pretrain = statistics.estimate({"stage": "pretrain", "metrics": {"mlm_perplexity": 9.0}},
                                   "mlm_perplexity", str(tmp_path))
    assert pretrain.value == 9.0 and pretrain.reason == statistics.NO_PER_EXAMPLE_PERPLEXITY


def _mrpc_dev(data_dir, gold):
    path = data_dir / "glue_data" / "MRPC" / "dev.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
        f"{g}\t{i}\t{i + 1}\tsentence a\tsentence b\n" for i, g in enumerate(gold)))


def test_a_record_without_the_gold_reads_it_from_the_data_it_names(tmp_path):
    """Harness records keep no copy of the benchmark's labels: the interval reads them from
    the run's data file, which must give the digest the record holds."""
    rng = np.random.default_rng(4)
    gold = rng.integers(0, 2, 120)
    files_dir = tmp_path / "runs" / "r" / "files"
    grid_runs = _write_glue_run(files_dir, "mrpc", gold, [
        (1e-4, seed, np.where(rng.random(120) < 0.75, gold, 1 - gold)) for seed in (0, 1)])
    record = _grid_record("r", "mrpc", grid_runs, 1e-4)
    beside = statistics.estimate(record, "accuracy", str(tmp_path))  # gold in files_dir
    spec = get_task("mrpc")
    digest = predictions.gold_digest(predictions.read_gold(spec, "dev", str(files_dir)))
    shutil.rmtree(files_dir / "restarts" / "gold")
    record["outputs"] = {"gold_sha256": {"dev": digest}}
    record["result"]["data_files"] = {"dev": "$BERT_DATA_DIR/glue_data/MRPC/dev.tsv"}
    _mrpc_dev(tmp_path / "data", gold)

    read_again = statistics.estimate(record, "accuracy", str(tmp_path), str(tmp_path / "data"))
    assert read_again.interval() == beside.interval()
    no_data = statistics.estimate(record, "accuracy", str(tmp_path))
    assert no_data.replicates is None and "no data directory" in no_data.reason
    other = gold.copy()
    other[7] = 1 - other[7]
    _mrpc_dev(tmp_path / "other", other)  # not the labels the run was scored on
    changed = statistics.estimate(record, "accuracy", str(tmp_path), str(tmp_path / "other"))
    assert changed.replicates is None and "not those the run was scored on" in changed.reason
    missing = statistics.estimate(record, "accuracy", str(tmp_path), str(tmp_path / "none"))
    assert missing.replicates is None and "dev.tsv" in missing.reason


def test_gold_values_are_what_read_gold_reads_back(tmp_path):
    """The gold the statistics rebuild from the data equals, digest included, the gold a
    run writes beside its restarts, for every kind."""
    cases = {
        "mrpc": [InputExample("0", "a", "b", "1"), InputExample("1", "a", "b", "0")],
        "stsb": [InputExample("0", "a", "b", 3.2), InputExample("1", "a", "b", 0.25)],
        "conll2003": [NerSentence(0, ("John", "runs"), ("B-PER", "O"))],
        "squad2.0": [SquadExample("q1", "who?", "the x", ("the", "x"), (0,) * 5,
                                  ("x", "the x"), False),
                     SquadExample("q2", "what?", "y", ("y",), (0,), (), True)],
    }
    for task, examples in cases.items():
        spec = get_task(task)
        predictions.write_gold(spec, "dev", examples, str(tmp_path / task))
        read = predictions.read_gold(spec, "dev", str(tmp_path / task))
        assert read == predictions.gold_values(spec, examples), task
        assert predictions.gold_digest(read) == predictions.gold_digest(
            predictions.gold_values(spec, examples))


def test_split_metric_names_and_file_round_trips(tmp_path):
    mnli, conll = get_task("mnli"), get_task("conll2003")
    assert statistics.split_metric(mnli, "accuracy") == ("dev_matched", "accuracy")
    assert statistics.split_metric(mnli, "dev_mismatched_accuracy") == (
        "dev_mismatched", "accuracy")
    assert statistics.split_metric(conll, "test_ner_f1") == ("test", "ner_f1")
    sentences = [NerSentence(0, ("John", "runs"), ("B-PER", "O")), NerSentence(0, ("x",), ("O",))]
    path = predictions.write_gold(conll, "dev", sentences, str(tmp_path))
    assert predictions.read_tag_lines(path) == [["B-PER", "O"], ["O"]]
    (tmp_path / "answers.json").write_text(json.dumps({"q1": ["a", 3]}))
    with pytest.raises(predictions.readers.DataFormatError, match="q1"):
        predictions.read_squad_answers(str(tmp_path / "answers.json"))


def test_perplexity_interval_resamples_heldout_sequences(tmp_path):
    """exp(sum loss / sum count) over resampled sequences, against scipy's bootstrap of the
    same statistic; two models on the same held-out records are paired."""
    rng = np.random.default_rng(0)
    count = rng.integers(5, 21, 400).astype(float)
    small_loss = count * rng.normal(6.0, 1.0, 400)  # the bigger model: lower on each sequence
    losses = {"small": small_loss, "big": small_loss - count * rng.normal(0.2, 0.3, 400)}
    records = {}
    for name, loss in losses.items():
        files = tmp_path / "runs" / name / "files"
        files.mkdir(parents=True)
        rows = ["index\tmlm_loss\tmlm_count\tmlm_correct\tnsp_loss\tnsp_correct"] + [
            f"{i}\t{l:.6g}\t{c:g}\t0\t0\t0" for i, (l, c) in enumerate(zip(loss, count))]
        (files / statistics.HELDOUT_LOSSES).write_text("\n".join(rows) + "\n")
        records[name] = {"run_id": name, "stage": "pretrain",
                         "argv": ["--eval_files", "runs/heldout/part-*"],
                         "metrics": {"mlm_perplexity": float(np.exp(loss.sum() / count.sum()))}}
    small = statistics.estimate(records["small"], "mlm_perplexity", str(tmp_path))
    low, high = small.interval()
    reference = scipy.stats.bootstrap(
        (losses["small"], count), lambda l, c: np.exp(l.sum() / c.sum()), paired=True,
        vectorized=False, n_resamples=2000, method="percentile", random_state=1)
    ref_low, ref_high = reference.confidence_interval
    width = ref_high - ref_low
    assert low < small.value < high
    assert abs(low - ref_low) < 0.15 * width and abs(high - ref_high) < 0.15 * width

    big = statistics.estimate(records["big"], "mlm_perplexity", str(tmp_path))
    paired = statistics.difference(small, big)
    assert paired.value == small.value - big.value
    assert np.std(paired.replicates) < np.hypot(np.std(small.replicates),
                                                np.std(big.replicates))  # correlated

    records["big"]["metrics"]["mlm_perplexity"] *= 1.01  # the file disagrees with the record
    refused = statistics.estimate(records["big"], "mlm_perplexity", str(tmp_path))
    assert refused.replicates is None and "heldout_losses.tsv gives" in refused.reason
