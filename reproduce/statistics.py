"""A cell's number, its spread over restarts and its 95% bootstrap confidence interval,
from a run record alone.

A fine-tuning cell is the mean, over the restarts at the learning rate picked on dev,
of the task's official metric on a dev split (`seed_statistics`, from glue_suite's grid
summary). Its interval is a percentile bootstrap over both sources of its noise, dev
examples and fine-tuning restarts (the multi-bootstrap of Sellam et al., 2022, "The
MultiBERTs", over fine-tuning seeds): each of RESAMPLES resamples draws n example
indices with replacement, the same indices for every restart (they were scored on the
same examples), draws k of the cell's k restarts with replacement, and averages the
drawn restarts' metric on those examples; the 2.5th and 97.5th percentiles of those
means bound the interval. With one restart it is the plain bootstrap over examples; with
restarts that disagree (one unlucky seed) it widens, where an interval over examples
alone would call their mean precise. Pretraining seeds are not resampled: each
pretrained row is one run.

The per-example predictions come from the run's restarts/ folder
(`glue_suite.predictions`: every restart's dev predictions), copied beside the record,
and the gold labels from the data files the run read (`split_gold`: the record holds
their digest, not a copy); a scorer per task kind recomputes the official metric on any
resample with glue_suite's own functions (`glue_suite.metrics`, `glue_suite.squad_eval`):
classification and regression resample examples, SQuAD resamples questions (v2.0's best
threshold searched again on each resample, as its metric is), CoNLL-2003 resamples
sentences (entity counts add up over sentences). Before use, each restart's metric on
all its examples must equal the one its record holds.

Pairing comes from the seed: the generator of a cell's indices is seeded by its examples'
keys (task, split, example ids in order), so two cells on the same dev examples draw the
same indices, and the difference of their replicates is a paired bootstrap; cells on
different examples (say a different --max_eval_examples) draw independently, and their
difference is an unpaired one. `difference` and `maximum` combine cells replicate by
replicate.

Held-out perplexity resamples held-out sequences (`perplexity_bootstrap`, from the
pretraining run's per-sequence losses). Cells without per-example data (records written
before restarts/ or heldout_losses.tsv existed) keep their number and say why they have
no interval.
"""

import dataclasses
import functools
import hashlib
import math
import os
from typing import Callable, Optional, Sequence

import numpy as np

from bert_tf import portable_paths
from bert_tf.cli import InputError
from glue_suite import metrics as glue_metrics
from glue_suite import predictions, readers, squad_eval, tfds_source
from glue_suite.tasks import REGRESSION, SPAN, TOKEN, TaskSpec, get_task
from reproduce.records import run_files_dir

RESAMPLES = 1000
CONFIDENCE = 0.95
_CHUNK = 100  # resamples scored at once: [100, n] indices, not [1000, n]
NO_PER_EXAMPLE_PERPLEXITY = "no per-example held-out losses in the pretraining record"
HELDOUT_LOSSES = "heldout_losses.tsv"  # bert_tf.trainer.HELDOUT_LOSSES, copied by the runner

# indices [B, n] into a split's examples -> the metric of one restart on each resample [B]
Scorer = Callable[[np.ndarray], np.ndarray]


class Unavailable(Exception):
    """A cell has no interval; the message says why (it is shown in the tables)."""


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A cell's number and, where per-example data exists, its bootstrap replicates.

    Args:
        value: the cell's number (mean over restarts; a pretraining metric as recorded).
        replicates: [RESAMPLES] the statistic on each resample; None: no interval.
        reason: why `replicates` is None.
    """
    value: float
    replicates: Optional[np.ndarray] = None
    reason: str = ""

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """The percentile interval; (nan, nan) without replicates or where the metric is
        undefined on some resample (e.g. Pearson r of constant predictions)."""
        if self.replicates is None or not np.all(np.isfinite(self.replicates)):
            return math.nan, math.nan
        tail = 100.0 * (1.0 - confidence) / 2.0
        low, high = np.percentile(self.replicates, [tail, 100.0 - tail])
        return float(low), float(high)


def difference(a: Estimate, b: Estimate) -> Estimate:
    """a - b, replicate by replicate: paired where a and b share their examples."""
    if a.replicates is None or b.replicates is None:
        return Estimate(a.value - b.value, None, a.reason or b.reason)
    return Estimate(a.value - b.value, a.replicates - b.replicates)


def maximum(estimates: Sequence[Estimate]) -> Estimate:
    """The best of several cells, taken again on every resample, so that the interval of
    "X - the best other row" accounts for which row is best being itself uncertain."""
    value = max(e.value for e in estimates)
    missing = [e.reason for e in estimates if e.replicates is None]
    if missing:
        return Estimate(value, None, missing[0])
    return Estimate(value, np.max([e.replicates for e in estimates], axis=0))


# --------------------------------------------------------------------------- restarts
def seed_statistics(record: dict, metric: str) -> tuple:
    """(mean, std, restarts, best run's value) of one metric of a finished record.

    Fine-tuning: over the restarts at the learning rate picked on dev (glue_suite's grid
    summary); other stages: the single value, std 0.
    """
    best = _number((record.get("metrics") or {}).get(metric))
    grid = (record.get("result") or {}).get("grid") or {}
    for group in grid.get("by_learning_rate", []):
        if group.get("learning_rate") == grid.get("best_learning_rate"):
            mean = _number(group.get("mean", {}).get(metric))
            if not math.isnan(mean):
                return mean, _number(group.get("std", {}).get(metric)), int(group["runs"]), best
    return best, 0.0, 1, best


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else math.nan


def picked_restarts(result: dict) -> list[dict]:
    """The grid's runs at the learning rate picked on dev: the restarts a cell averages."""
    grid = result.get("grid") or {}
    return [r for r in grid.get("runs", []) if r["learning_rate"] == grid.get("best_learning_rate")]


def split_metric(spec: TaskSpec, metric: str) -> tuple[str, str]:
    """A metrics.json key -> (evaluation split, metric on it): glue_suite.run names the
    first split's metrics plainly and prefixes the others' with the split's name
    ("dev_mismatched_accuracy", "test_ner_f1")."""
    for split in spec.eval_splits[1:]:
        if metric.startswith(f"{split}_"):
            return split, metric[len(split) + 1:]
    return spec.eval_splits[0], metric


# ---------------------------------------------------------------------------- scorers
def _row_by_row(metric_of: Callable[[np.ndarray], float]) -> Scorer:
    """A scorer that computes the metric on each resample in turn (MCC, F1, Spearman...)."""
    return lambda indices: np.array([metric_of(row) for row in indices], np.float64)


def glue_scorer(task: str, metric: str, predicted: np.ndarray, gold: np.ndarray) -> Scorer:
    """Classification, regression and multiple choice: `glue_suite.metrics` on the
    resampled examples (accuracy, as a mean of per-example hits, all at once)."""
    if metric not in get_task(task).metrics:
        raise Unavailable(f"{task} has no metric {metric}")
    if metric == "accuracy":
        hits = (predicted == gold).astype(np.float64)
        return lambda indices: 100.0 * hits[indices].mean(axis=1)
    return _row_by_row(lambda rows: glue_metrics.compute_metrics(
        task, predicted[rows], gold[rows])[metric])


def ner_scorer(metric: str, gold: Sequence[Sequence[str]],
               predicted: Sequence[Sequence[str]]) -> Scorer:
    """Entity-level precision, recall or F1 (conlleval's) over resampled sentences: each
    sentence's entity counts come from `glue_suite.metrics.entity_f1`; a resample's
    score is computed from their sums, as entity_f1 computes it over all sentences."""
    if metric not in ("ner_f1", "ner_precision", "ner_recall"):
        raise Unavailable(f"no bootstrap scorer for conll2003 metric {metric}")
    per_sentence = (glue_metrics.entity_f1([g], [p]) for g, p in zip(gold, predicted))
    counts = np.array([[c["num_gold"], c["num_pred"], c["num_correct"]] for c in per_sentence],
                      np.float64).reshape(-1, 3)  # [sentences, 3]

    def score(indices):
        num_gold, num_pred, correct = (counts[:, k][indices].sum(axis=1) for k in range(3))
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(num_pred > 0, 100.0 * correct / num_pred, 0.0)
            recall = np.where(num_gold > 0, 100.0 * correct / num_gold, 0.0)
            f1 = np.where(precision + recall > 0,
                          2 * precision * recall / (precision + recall), 0.0)
        return {"ner_f1": f1, "ner_precision": precision, "ner_recall": recall}[metric]
    return score


def squad_v1_scorer(metric: str, answers: Sequence[Sequence[str]],
                    predicted: Sequence[Optional[str]]) -> Scorer:
    """SQuAD v1.1 exact match or F1: the mean over resampled questions of each question's
    official score (best over its gold answers; a missing prediction scores 0)."""
    score_of = {"exact_match": squad_eval.exact_match, "f1": squad_eval.f1_v1}.get(metric)
    if score_of is None:
        raise Unavailable(f"no bootstrap scorer for squad1.1 metric {metric}")
    values = np.array([0.0 if text is None else max(score_of(text, g) for g in golds)
                       for text, golds in zip(predicted, answers)], np.float64)
    return lambda indices: 100.0 * values[indices].mean(axis=1)


def squad_v2_scorer(metric: str, answers: Sequence[Sequence[str]],
                    best_non_null: Sequence[str], null_odds: Sequence[float],
                    threshold: float) -> Scorer:
    """SQuAD v2.0 as `squad_postprocess.score` computes it: the best non-null answers
    scored against the gold (an unanswerable question's gold is ""), then "no answer"
    where null_odds > `threshold` (exact, f1), or at the best threshold searched on each
    resample (best_exact, best_f1: the official search, in null_odds order)."""
    base = metric[len("best_"):] if metric.startswith("best_") else metric
    score_of = {"exact": squad_eval.exact_match, "f1": squad_eval.f1_v2}.get(base)
    if score_of is None:
        raise Unavailable(f"no bootstrap scorer for squad2.0 metric {metric}")
    has_answer = np.array([bool(golds) for golds in answers])
    raw = np.array([max(score_of(text, g) for g in
                        [g for g in golds if squad_eval.normalize_answer(g)] or [""])
                    for text, golds in zip(best_non_null, answers)], np.float64)
    odds = np.asarray(null_odds, np.float64)
    if not metric.startswith("best_"):
        values = np.where(odds > threshold, (~has_answer).astype(np.float64), raw)
        return lambda indices: 100.0 * values[indices].mean(axis=1)
    # Start with every question null (credit for the unanswerable ones), then answer them
    # in increasing null_odds: the score moves by `step`; the best running score counts.
    step = np.where(has_answer, raw, -(np.array([bool(t) for t in best_non_null], np.float64)))
    rank = np.empty(len(odds), np.int64)
    rank[np.argsort(odds, kind="stable")] = np.arange(len(odds))

    def score(indices):
        ordered = np.take_along_axis(indices, np.argsort(rank[indices], axis=1, kind="stable"), 1)
        best_gain = np.maximum(np.cumsum(step[ordered], axis=1).max(axis=1), 0.0)
        return 100.0 * ((~has_answer)[indices].sum(axis=1) + best_gain) / indices.shape[1]
    return score


# ------------------------------------------------------------------ per-example data
@dataclasses.dataclass(frozen=True)
class SplitData:
    """One split's per-example data in a run: what the examples are (task, split, keys
    in gold order), and per restart its scorer and its metric on all examples."""
    task: str
    split: str
    keys: tuple
    scorers: tuple
    full: tuple


def _aligned(values: dict, keys: Sequence[str], what: str) -> list:
    missing = [k for k in keys if k not in values]
    if missing:
        raise Unavailable(f"{what} lacks {len(missing)} of {len(keys)} examples "
                          f"(e.g. {missing[0]!r})")
    return [values[k] for k in keys]


def restart_scorer(spec: TaskSpec, metric: str, gold, files: list, what: str,
                   threshold: float) -> Scorer:
    """One restart's scorer from its `predictions.read_restart` files and the gold."""
    if spec.kind == TOKEN:
        if len(files[0]) != len(gold):
            raise Unavailable(f"{what} has {len(files[0])} sentences, the gold {len(gold)}")
        return ner_scorer(metric, gold, files[0])
    keys = list(gold)
    if spec.kind == SPAN:
        answers = [gold[k] for k in keys]
        if spec.name == "squad2.0":
            return squad_v2_scorer(metric, answers, _aligned(files[0], keys, what),
                                   _aligned(files[1], keys, what), threshold)
        return squad_v1_scorer(metric, answers, [files[0].get(k) for k in keys])
    predicted = _aligned(files[0], keys, what)
    if spec.kind == REGRESSION:
        return glue_scorer(spec.name, metric, np.array(predicted, np.float64),
                           np.array([gold[k] for k in keys], np.float64))
    ids = {label: i for i, label in enumerate(spec.labels)}
    return glue_scorer(spec.name, metric, np.array([ids[p] for p in predicted]),
                       np.array([ids[gold[k]] for k in keys]))


def _same(computed: float, recorded) -> bool:
    recorded = _number(recorded)
    if math.isnan(computed) or math.isnan(recorded):
        return math.isnan(computed) and math.isnan(recorded)
    return math.isclose(computed, recorded, rel_tol=1e-4, abs_tol=1e-6)


def split_gold(record: dict, spec: TaskSpec, split: str, files_dir: str,
               data_dir: Optional[str]):
    """The split's gold labels (`predictions.read_gold`): beside the restarts where the
    run's directory holds them (glue_suite.run writes them there), else read again from
    the data file the run read. A harness record keeps no copy of the benchmark's labels,
    only their digest (`outputs.gold_sha256`), which the gold must match either way."""
    expected = ((record.get("outputs") or {}).get("gold_sha256") or {}).get(split)
    if os.path.exists(predictions.gold_path(spec, split, files_dir)):
        try:
            gold = predictions.read_gold(spec, split, files_dir)
        except InputError as e:
            raise Unavailable(f"gold labels: {e}") from None
    elif expected is None:
        raise Unavailable("no per-example outputs in the record: no restarts/ folder")
    else:
        gold = _data_gold(record["result"], split, data_dir)
    if expected is not None and predictions.gold_digest(gold) != expected:
        raise Unavailable(f"the gold labels of {split} are not those the run was scored on "
                          f"(sha256 {predictions.gold_digest(gold)[:12]}, the record "
                          f"{expected[:12]})")
    return gold


def _data_gold(result: dict, split: str, data_dir: Optional[str]):
    """The gold of the file the run read as `split` (its record's data_files), cut as the
    run cut it (--max_eval_examples)."""
    recorded = (result.get("data_files") or {}).get(split)
    if recorded is None:
        raise Unavailable(f"the record names no {split} data file to read the gold from")
    path = portable_paths.data_file(recorded, data_dir)
    if path is None:
        raise Unavailable(f"the gold labels are read from {recorded}: no data directory "
                          f"(--data_dir or ${portable_paths.DATA_DIR_VAR})")
    config = result.get("config") or {}
    try:
        modified = os.stat(path).st_mtime_ns
    except OSError:
        modified = None  # tfds, or a missing file (read_file says so)
    try:
        return _gold_in_file(result["task"], split, path, bool(config.get("skip_bad_rows")),
                             config.get("max_eval_examples"), config.get("tfds_data_dir"),
                             modified)
    except InputError as e:
        raise Unavailable(f"gold labels: {e}") from None


@functools.lru_cache(maxsize=None)  # one read of a dev file for all the runs scored on it
def _gold_in_file(task: str, split: str, source: str, skip_bad_rows: bool,
                  limit: Optional[int], tfds_data_dir: Optional[str],
                  modified: Optional[int]):
    if source.startswith(tfds_source.SOURCE_PREFIX):  # glue_suite.run --source tfds
        # Tables are built offline: only a copy tfds prepared already, never a download.
        examples = tfds_source.load_examples(task, split, tfds_data_dir, skip_bad_rows,
                                             download=False)[0]
    else:
        examples = readers.read_file(task, split, source, skip_bad_rows)[0]
    return predictions.gold_values(get_task(task), examples[:limit] if limit else examples)


def split_data(record: dict, metric: str, files_dir: str,
               data_dir: Optional[str] = None) -> SplitData:
    """The per-example data behind one fine-tuning cell.

    Args:
        files_dir: the run's outputs (restarts/).
        data_dir: where the gold is read when files_dir lacks it (`split_gold`).

    Raises:
        Unavailable: no restarts/ outputs, no gold, a file missing, or a restart whose
            metric on all its examples differs from its record's.
    """
    result = record.get("result") or {}
    if "task" not in result:
        raise Unavailable("no fine-tuning result in the record")
    spec = get_task(result["task"])
    split, name = split_metric(spec, metric)
    gold = split_gold(record, spec, split, files_dir, data_dir)
    keys = tuple(str(i) for i in range(len(gold))) if spec.kind == TOKEN else tuple(gold)
    threshold = ((result.get("config") or {}).get("squad") or {}).get(
        "null_score_diff_threshold", 0.0)
    scorers, full = [], []
    for run in picked_restarts(result):
        what = f"restart lr {run['learning_rate']:g} seed {run['seed']}"
        directory = predictions.restart_dir(files_dir, run["learning_rate"], run["seed"])
        try:
            files = predictions.read_restart(spec, split, directory)
        except OSError:
            raise Unavailable(f"no per-example outputs of {what}") from None
        except InputError as e:
            raise Unavailable(f"{what}: {e}") from None
        scorer = restart_scorer(spec, name, gold, files, what, threshold)
        value = float(scorer(np.arange(len(keys))[None])[0])
        if not _same(value, run["metrics"].get(metric)):
            raise Unavailable(f"{what}: its per-example outputs give {metric} {value:.4f}, "
                              f"its record {run['metrics'].get(metric)}")
        scorers.append(scorer)
        full.append(value)
    if not scorers:
        raise Unavailable("no restarts at the picked learning rate in the record")
    return SplitData(spec.name, split, keys, tuple(scorers), tuple(full))


# ---------------------------------------------------------------------------- bootstrap
def _seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")


def resample_indices(examples: Sequence[str], resamples: int = RESAMPLES):
    """Yields [<=100, n] arrays of indices into `examples` drawn with replacement,
    `resamples` rows in all, from a generator seeded by the examples' names (task,
    split and keys): the same examples give the same indices, which pairs the cells
    evaluated on them."""
    rng = np.random.default_rng(_seed("\n".join(examples)))
    for start in range(0, resamples, _CHUNK):
        yield rng.integers(0, len(examples), (min(_CHUNK, resamples - start), len(examples)))


def bootstrap(data: SplitData, cell: str, resamples: int = RESAMPLES) -> np.ndarray:
    """[resamples] replicates of the mean over restarts of the metric, examples and
    restarts resampled (see the module docstring). `cell`: the cell's name (its run id),
    which seeds the restart draws: two cells' restarts are independent experiments, so
    they are drawn independently, and the same cell is drawn the same way every time."""
    examples = [f"{data.task}/{data.split}/{key}" for key in data.keys]
    rng = np.random.default_rng(_seed(f"restarts of {cell}"))
    replicates = []
    for indices in resample_indices(examples, resamples):
        scores = np.stack([score(indices) for score in data.scorers])  # [k, B]
        k, b = scores.shape
        picked = rng.integers(0, k, (b, k))
        replicates.append(scores[picked, np.arange(b)[:, None]].mean(axis=1))
    return np.concatenate(replicates)


def estimate(record: dict, metric: str, output_dir: str, data_dir: Optional[str] = None,
             resamples: int = RESAMPLES) -> Estimate:
    """A finished record's cell: its number (`seed_statistics`) and, where the record
    carries per-example outputs (OUTPUT_DIR/runs/<run id>/files), its bootstrap
    replicates (the gold read under `data_dir`: `split_gold`)."""
    return files_estimate(record, metric, run_files_dir(output_dir, record.get("run_id", "")),
                          data_dir, resamples)


def files_estimate(record: dict, metric: str, files_dir: str, data_dir: Optional[str] = None,
                   resamples: int = RESAMPLES) -> Estimate:
    """`estimate` of a record whose per-example outputs lie in `files_dir`."""
    value = seed_statistics(record, metric)[0]
    if record.get("stage") == "pretrain":
        try:
            return Estimate(value, perplexity_bootstrap(record, metric, files_dir, resamples))
        except Unavailable as e:
            return Estimate(value, None, str(e))
    if record.get("stage") != "finetune":
        return Estimate(value, None, f"a {record.get('stage')} record has no examples")
    try:
        return Estimate(value, bootstrap(split_data(record, metric, files_dir, data_dir),
                                         record["run_id"], resamples))
    except Unavailable as e:
        return Estimate(value, None, str(e))


def perplexity_bootstrap(record: dict, metric: str, files_dir: str,
                         resamples: int = RESAMPLES) -> np.ndarray:
    """[resamples] replicates of the held-out masked-LM perplexity, exp(sum of loss /
    sum of predictions) over resampled sequences, from the record's heldout_losses.tsv
    (bert_tf.trainer.write_heldout_losses). The sequences are named by the record's
    --eval_files, so models evaluated on the same held-out records are paired."""
    if metric != "mlm_perplexity":
        raise Unavailable(f"no interval for the pretraining metric {metric}")
    path = os.path.join(files_dir, HELDOUT_LOSSES)
    if not os.path.exists(path):
        raise Unavailable(NO_PER_EXAMPLE_PERPLEXITY)
    table = np.genfromtxt(path, delimiter="\t", names=True)
    loss, count = np.atleast_1d(table["mlm_loss"]), np.atleast_1d(table["mlm_count"])
    recorded = _number((record.get("metrics") or {}).get(metric))
    if not _same(math.exp(loss.sum() / count.sum()), recorded):
        raise Unavailable(f"{HELDOUT_LOSSES} gives perplexity "
                          f"{math.exp(loss.sum() / count.sum()):.4f}, the record {recorded}")
    argv = record.get("argv") or []
    eval_files = argv[argv.index("--eval_files") + 1] if "--eval_files" in argv else "heldout"
    examples = [f"{eval_files}/{i}" for i in range(len(loss))]
    return np.concatenate([np.exp(loss[idx].sum(axis=1) / count[idx].sum(axis=1))
                           for idx in resample_indices(examples, resamples)])


def estimate_records(records: list, output_dir: Optional[str],
                     data_dir: Optional[str] = None, resamples: int = RESAMPLES) -> dict:
    """{(run_id, metric): Estimate} of every cell of every finished record (`output_dir`
    None: numbers only, no intervals; `data_dir`: where the gold labels are read)."""
    estimates = {}
    for record in records:
        if record.get("status") != "finished":
            continue
        for cell in record.get("cells", []):
            key = (record["run_id"], cell["metric"])
            if key in estimates:
                continue  # one run fills cells of several tables
            if output_dir is None:
                estimates[key] = Estimate(seed_statistics(record, cell["metric"])[0], None,
                                          "no output directory given")
            else:
                estimates[key] = estimate(record, cell["metric"], output_dir, data_dir,
                                          resamples)
    return estimates
