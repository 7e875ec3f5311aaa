"""Prediction files: one write/read pair per task kind, the one home of their formats.

    classification, regression, multiple_choice   <name>.tsv   `index<TAB>prediction`
    token (CoNLL-2003)                            <name>.txt   `word gold predicted`
    span (SQuAD)                                  predictions.json, nbest_predictions.json, ...

The TSV is the GLUE leaderboard format; the runner writes dev predictions the same way, so
`python -m glue_suite.evaluate` re-scores them. The CoNLL file is conlleval's input. The
SQuAD files are the original run_squad.py's, which the official evaluation scripts read.
Every write is all-or-nothing (bert_tf.files): a crashed run leaves no truncated file.

Every restart of the learning-rate x seed grid also keeps its per-example predictions,
and the gold labels are written once beside them, so that confidence intervals can be
computed from a run's outputs alone (reproduce.statistics). The harness commits the
restarts but not the gold, a copy of the benchmark's own labels: its records hold the
gold's `gold_digest`, and the statistics read the gold again from the data files.

    restarts/gold/<split>_labels.tsv | .txt | _answers.json     gold, once per split
    restarts/lr<lr>-seed<seed>/<split>_predictions.tsv         GLUE, SWAG (as above)
    restarts/lr<lr>-seed<seed>/<split>_tags.txt                CoNLL-2003: tag lines
    restarts/lr<lr>-seed<seed>/predictions.json                SQuAD v1.1
    restarts/lr<lr>-seed<seed>/best_non_null_predictions.json  SQuAD v2.0: what its
        + null_odds.json                                       metrics are computed from

Tag lines (one sentence per line, its tags separated by spaces) are the CoNLL file
without words and gold, a quarter of its size (CoNLL-2003 dev: 138 KB, not 552 KB): every
restart of every NER run keeps one per evaluation split, and records are committed.
"""

import dataclasses
import hashlib
import json
import os
import shutil
from typing import Optional, Sequence, Union

import numpy as np

from bert_tf import files
from glue_suite import readers, squad_postprocess
from glue_suite.readers import NerSentence
from glue_suite.squad_postprocess import SquadPredictions
from glue_suite.tasks import (CLASSIFICATION, KINDS, MULTIPLE_CHOICE, REGRESSION, SPAN,
                              TOKEN, TaskSpec, get_task)

TSV_HEADER = ("index", "prediction")
RESTARTS = "restarts"  # under a run's output directory
GOLD = "gold"  # under RESTARTS


# ---------------------------------------------------------------------------------------
# GLUE and SWAG: index<TAB>prediction
# ---------------------------------------------------------------------------------------

def write_tsv(task: str, examples: Sequence, predictions, path: str) -> None:
    """Writes `index<TAB>prediction` rows, the GLUE leaderboard format.

    Args:
        task: a classification, regression or multiple-choice task.
        examples: the examples predicted, in order; their guid is the index.
        predictions: class ids [N] (written as the task's label strings), or scores [N]
            for STS-B (written exactly, so re-scoring the file reproduces the metrics).
        path: output file (e.g. `<output_dir>/submission/STS-B.tsv`).
    """
    spec = get_task(task)
    predictions = np.asarray(predictions)
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
    if spec.kind == REGRESSION:
        values = [repr(float(p)) for p in predictions]
    else:
        values = [spec.labels[int(p)] for p in predictions]
    with files.atomic_open(path) as f:
        f.write("\t".join(TSV_HEADER) + "\n")
        for ex, value in zip(examples, values):
            f.write(f"{ex.guid}\t{value}\n")


def read_tsv(task: str, path: str) -> dict[str, Union[str, float]]:
    """Reads an `index<TAB>prediction` file -> {index: label string or float score}."""
    spec = get_task(task)
    lines = readers._read_lines(path)
    if not lines or tuple(lines[0].split("\t")) != TSV_HEADER:
        raise readers.DataFormatError(path, 1, "expected the header 'index<TAB>prediction'")
    predictions = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise readers.DataFormatError(path, lineno, f"expected 2 tab-separated fields, "
                                                        f"found {len(fields)}")
        index, raw = fields
        if index in predictions:
            raise readers.DataFormatError(path, lineno, f"index {index!r} occurs twice")
        value, error = readers._parse_label(raw, spec.labels, spec.kind == REGRESSION)
        if error:
            raise readers.DataFormatError(path, lineno, "prediction " + error)
        predictions[index] = value
    return predictions


# ---------------------------------------------------------------------------------------
# CoNLL-2003: word gold predicted
# ---------------------------------------------------------------------------------------

def write_conll(sentences: Sequence[NerSentence], tags: Sequence[Sequence[str]],
                path: str) -> None:
    """`word gold predicted` per line, a blank line after each sentence (conlleval)."""
    with files.atomic_open(path) as f:
        for sentence, predicted in zip(sentences, tags):
            for word, gold, tag in zip(sentence.words, sentence.tags, predicted):
                f.write(f"{word} {gold} {tag}\n")
            f.write("\n")


def read_conll(path: str) -> list[list[tuple[str, str, str]]]:
    """A `write_conll` file -> per sentence, its (word, gold, predicted) triples."""
    sentences, current = [], []
    for lineno, line in enumerate(readers._read_lines(path) + [""], start=1):
        if not line:  # a sentence ends (the final "" closes the last one)
            if current:
                sentences.append(current)
            current = []
            continue
        fields = tuple(line.split(" "))
        if len(fields) != 3:
            raise readers.DataFormatError(path, lineno, f"expected 'word gold predicted', "
                                                        f"found {len(fields)} fields")
        current.append(fields)
    return sentences


def write_tag_lines(tags: Sequence[Sequence[str]], path: str) -> None:
    """One sentence per line, its tags separated by spaces (CoNLL tags hold no space)."""
    with files.atomic_open(path) as f:
        for sentence in tags:
            f.write(" ".join(sentence) + "\n")


def read_tag_lines(path: str) -> list[list[str]]:
    """A `write_tag_lines` file -> per sentence, its tags."""
    return [line.split(" ") if line else [] for line in readers._read_lines(path)]


# ---------------------------------------------------------------------------------------
# SQuAD: the original run_squad.py's JSON files
# ---------------------------------------------------------------------------------------

def write_squad(output_dir: str, result: SquadPredictions, version_2: bool,
                best_threshold: Optional[float] = None) -> list[str]:
    """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json and
    best_non_null_predictions.json (every question answered: the span head alone, without
    abstention), plus predictions_best_threshold.json when `best_threshold` is given.
    Returns the paths."""
    values = {"predictions.json": result.predictions,
              "nbest_predictions.json": result.nbest}
    if version_2:
        values["null_odds.json"] = result.null_odds
        values["best_non_null_predictions.json"] = result.best_non_null
        if best_threshold is not None:
            values["predictions_best_threshold.json"] = squad_postprocess.at_threshold(
                result, best_threshold)
    paths = []
    for name, value in values.items():
        paths.append(os.path.join(output_dir, name))
        files.write_json(paths[-1], value)
    return paths


def read_squad(path: str) -> dict[str, str]:
    """A SQuAD predictions file -> {question id: answer text ("": no answer)}."""
    return _read_squad_json(path, str, "an answer string")


def read_null_odds(path: str) -> dict[str, float]:
    """A null_odds (na_prob) file -> {question id: no-answer score}."""
    return _read_squad_json(path, (int, float), "a number")


def read_squad_answers(path: str) -> dict[str, list[str]]:
    """A gold answers file -> {question id: [answer texts]} ([]: unanswerable)."""
    values = _read_squad_json(path, list, "a list of answer strings")
    for qid, answers in values.items():
        if not all(isinstance(a, str) for a in answers):
            raise readers.DataFormatError(path, f"question {qid!r}",
                                          "holds an answer that is not a string")
    return values


def _read_squad_json(path: str, value_type, expected: str) -> dict:
    """A JSON object {question id: value}; DataFormatError naming the first bad value."""
    values = files.read_json(path)
    if not isinstance(values, dict):
        raise readers.DataFormatError(path, 1, f"a JSON {type(values).__name__}; expected "
                                               f"an object {{question id: {expected}}}")
    for qid, value in values.items():
        if isinstance(value, bool) or not isinstance(value, value_type):
            raise readers.DataFormatError(path, f"question {qid!r}",
                                          f"{json.dumps(value)[:50]} is not {expected}")
    return values


# ---------------------------------------------------------------------------------------
# One split's predictions, in its kind's format
# ---------------------------------------------------------------------------------------

def _split_tsv(spec, split, examples, predictions, output_dir):
    path = os.path.join(output_dir, f"{split}_predictions.tsv")
    write_tsv(spec.name, examples, predictions, path)
    return [path]


def _split_conll(spec, split, examples, predictions, output_dir):
    path = os.path.join(output_dir, f"{split}_predictions.txt")
    write_conll(examples, predictions, path)
    return [path]


def _split_squad(spec, split, examples, predictions, output_dir):
    # v2.0 also gets the answers at the best threshold, searched on this split's labels.
    version_2 = spec.name == "squad2.0"
    best = squad_postprocess.best_f1_threshold(examples, predictions) if version_2 else None
    return write_squad(output_dir, predictions, version_2, best)


# kind -> writer(spec, split name, examples, predictions, output_dir) -> paths written.
_SPLIT_WRITERS = {CLASSIFICATION: _split_tsv, REGRESSION: _split_tsv,
                  MULTIPLE_CHOICE: _split_tsv, TOKEN: _split_conll, SPAN: _split_squad}
assert set(_SPLIT_WRITERS) == set(KINDS)


def write_split(spec: TaskSpec, split: str, examples: Sequence, predictions,
                output_dir: str) -> list[str]:
    """A labelled split's predictions in its kind's format; returns the paths written.

    Args:
        spec: the task evaluated.
        split: the split's name (e.g. "dev", "dev_mismatched"), part of the file name;
            SQuAD files have fixed names (one dev split).
        examples: the split's examples, in prediction order.
        predictions: `scoring.Evaluation.predictions` of the split.
        output_dir: the run's directory.
    """
    return _SPLIT_WRITERS[spec.kind](spec, split, examples, predictions, output_dir)


# ---------------------------------------------------------------------------------------
# Every restart's per-example predictions, and the gold labels once
# ---------------------------------------------------------------------------------------

def restart_dir(output_dir: str, learning_rate: float, seed: int) -> str:
    """Where one restart of the grid keeps its predictions, e.g. restarts/lr0.0001-seed0."""
    return os.path.join(output_dir, RESTARTS, f"lr{learning_rate:g}-seed{seed}")


def gold_dir(output_dir: str) -> str:
    return os.path.join(output_dir, RESTARTS, GOLD)


def _tsv_names(spec, split):
    return [f"{split}_predictions.tsv"]


def _squad_names(spec, split):
    # v2.0's metrics (at any no-answer threshold, and the best one) are computed from the
    # best non-null answers and null_odds (squad_postprocess.score): those are kept.
    if spec.name == "squad2.0":
        return ["best_non_null_predictions.json", "null_odds.json"]
    return ["predictions.json"]


# kind -> (spec, split) -> the names of one restart's files, in `read_restart`'s order.
_RESTART_NAMES = {CLASSIFICATION: _tsv_names, REGRESSION: _tsv_names,
                  MULTIPLE_CHOICE: _tsv_names, SPAN: _squad_names,
                  TOKEN: lambda spec, split: [f"{split}_tags.txt"]}
_GOLD_NAMES = {CLASSIFICATION: "{split}_labels.tsv", REGRESSION: "{split}_labels.tsv",
               MULTIPLE_CHOICE: "{split}_labels.tsv", SPAN: "{split}_answers.json",
               TOKEN: "{split}_labels.txt"}
assert set(_RESTART_NAMES) == set(_GOLD_NAMES) == set(KINDS)


def write_restart(spec: TaskSpec, split: str, examples: Sequence, predictions,
                  directory: str) -> list[str]:
    """One restart's predictions of a labelled split (`restart_dir`); returns the paths.

    Args:
        predictions: `scoring.Evaluation.predictions`.
    """
    paths = [os.path.join(directory, name) for name in _RESTART_NAMES[spec.kind](spec, split)]
    os.makedirs(directory, exist_ok=True)
    if spec.kind == TOKEN:
        write_tag_lines(predictions, paths[0])
    elif spec.kind == SPAN:
        values = ([predictions.best_non_null, predictions.null_odds]
                  if spec.name == "squad2.0" else [predictions.predictions])
        for path, value in zip(paths, values):
            files.write_json(path, value)
    else:
        write_tsv(spec.name, examples, predictions, paths[0])
    return paths


def read_restart(spec: TaskSpec, split: str, directory: str) -> list:
    """What `write_restart` wrote: [{index: label or score}] (GLUE, SWAG), [tags per
    sentence] (CoNLL-2003), [{qid: answer}] (SQuAD v1.1) or [{qid: best non-null
    answer}, {qid: null odds}] (SQuAD v2.0)."""
    paths = [os.path.join(directory, name) for name in _RESTART_NAMES[spec.kind](spec, split)]
    if spec.kind == TOKEN:
        return [read_tag_lines(paths[0])]
    if spec.kind == SPAN:
        return [read_squad(paths[0])] + [read_null_odds(p) for p in paths[1:]]
    return [read_tsv(spec.name, paths[0])]


def write_split_from_restart(spec: TaskSpec, split: str, examples: Sequence,
                             restart: str, output_dir: str,
                             null_score_diff_threshold: float = 0.0) -> list[str]:
    """`write_split`'s files made from one restart's (`write_restart`'s, in directory
    `restart`), for a best run whose model is not at hand; returns the paths. SQuAD's
    n-best lists are not in a restart: nbest_predictions.json is empty. v2.0's answers
    are the restart's best non-null ones, cut at `null_score_diff_threshold`."""
    values = read_restart(spec, split, restart)
    if spec.kind == TOKEN:
        return write_split(spec, split, examples, values[0], output_dir)
    if spec.kind == SPAN:
        best_non_null, null_odds = values if len(values) == 2 else (values[0], {})
        result = SquadPredictions(best_non_null, {}, best_non_null, null_odds)
        if null_odds:
            result = dataclasses.replace(result, predictions=squad_postprocess.at_threshold(
                result, null_score_diff_threshold))
        return write_split(spec, split, examples, result, output_dir)
    name = _tsv_names(spec, split)[0]  # the split's file and the restart's are alike
    path = os.path.join(output_dir, name)
    with files.atomic_path(path) as temporary:
        shutil.copyfile(os.path.join(restart, name), temporary)
    return [path]


def gold_path(spec: TaskSpec, split: str, output_dir: str) -> str:
    return os.path.join(gold_dir(output_dir), _GOLD_NAMES[spec.kind].format(split=split))


def write_gold(spec: TaskSpec, split: str, examples: Sequence, output_dir: str) -> str:
    """The split's gold labels in its kind's format, beside the restarts; returns the path."""
    path = gold_path(spec, split, output_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if spec.kind == TOKEN:
        write_tag_lines(gold_values(spec, examples), path)
    elif spec.kind == SPAN:
        files.write_json(path, gold_values(spec, examples))
    else:
        write_tsv(spec.name, examples, readers.example_labels(spec.name, examples), path)
    return path


def read_gold(spec: TaskSpec, split: str, output_dir: str):
    """What `write_gold` wrote: {index: label or score}, [tags per sentence] or
    {qid: [answers]}."""
    path = gold_path(spec, split, output_dir)
    if spec.kind == TOKEN:
        return read_tag_lines(path)
    if spec.kind == SPAN:
        return read_squad_answers(path)
    return read_tsv(spec.name, path)


def gold_values(spec: TaskSpec, examples: Sequence):
    """The gold of `examples` as `read_gold` returns it once `write_gold` wrote it."""
    if spec.kind == TOKEN:
        return [list(s.tags) for s in examples]
    if spec.kind == SPAN:
        return {e.qas_id: list(e.answers) for e in examples}
    labels = readers.example_labels(spec.name, examples)
    if spec.kind == REGRESSION:
        return {e.guid: float(v) for e, v in zip(examples, labels)}
    return {e.guid: spec.labels[int(v)] for e, v in zip(examples, labels)}


def gold_digest(gold) -> str:
    """sha256 of a split's gold (`read_gold`, `gold_values`), whatever file held it."""
    text = json.dumps(gold, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
