"""Predictions of an exported task model (`glue_suite.run --export_dir DIR`) on a file.

    python -m glue_suite.predict --model DIR --input_file dev.tsv --output_file out.tsv

Input: a file in the task's own format, read by `glue_suite.readers` as an unlabelled
split (a label column, if present, is ignored), so the benchmark's dev and test files
work as they are:
  GLUE     TSV whose header names the task's text columns (`TaskSpec.columns`, e.g. RTE
           sentence1, sentence2; CoLA and SST-2 sentence); the `index` (QQP `id`) column
           names the rows, else their 0-based number. Tab-separated, no quoting. CoLA's
           train and dev files have no header: add one (source, label,
           original_label, sentence, tab-separated).
  SWAG     the swagaf CSV (val.csv, test.csv).
  SQuAD    the SQuAD JSON (dev-v1.1.json, dev-v2.0.json).
A malformed row stops with `error: FILE:LINE: ...`.

Output, by the name of --output_file:
  *.jsonl  one JSON object per example: {"index", "prediction", "probabilities":
           {label: p}} (STS-B: {"index", "prediction": score}).
  else     GLUE / SWAG: `index<TAB>prediction`, the run's <split>_predictions.tsv and
           leaderboard format (`python -m glue_suite.evaluate` scores it against a
           labelled file). SQuAD: the official {question id: answer} JSON; for v2.0 also
           <name>.null_odds.json beside it (the evaluation script's --na-prob-file).

SQuAD answers come from the model's per-window logits through the original
post-processing (`glue_suite.squad_postprocess`), run here, outside the graph.
"""

# Before the imports that pull in Keras: when this process is the command, start it
# without the libraries Keras imports for features no command here uses.
if __name__ == "__main__":
    from bert_tf.cli import import_keras_without_extras
    import_keras_without_extras()

import argparse
import json
import os
import sys
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import files
from bert_tf.cli import InputError, check_output_file, run_main
from bert_tf.tokenization import load_vocab
from glue_suite import predictions, readers, squad_postprocess
from glue_suite.export import read_task_file
from glue_suite.scoring import SquadOptions
from glue_suite.tasks import CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION, SPAN, get_task


def input_split(task: str) -> str:
    """The split name the input file is read as: an unlabelled one (the test split;
    SQuAD: dev, read without training answer positions)."""
    spec = get_task(task)
    if spec.kind == SPAN:
        return "dev"
    return next(s for s in spec.files if not readers.is_labelled(task, s))


def _batches(values: list, batch_size: int):
    for i in range(0, len(values), batch_size):
        yield values[i:i + batch_size]


def _serve(serving, examples: list, batch_size: int, inputs) -> dict:
    """The signature's outputs for every example, concatenated over batches;
    `inputs(batch)` gives the signature's keyword arguments."""
    parts = [{k: v.numpy() for k, v in serving(**inputs(batch)).items()}
             for batch in _batches(examples, batch_size)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _sentence_inputs(spec):
    def inputs(batch):
        values = {"text_a": tf.constant([e.text_a for e in batch])}
        if spec.columns.text_b is not None:
            values["text_b"] = tf.constant([e.text_b for e in batch])
        return values
    return inputs


def _swag_inputs(batch):
    return {"context": tf.constant([e.context for e in batch]),
            "endings": tf.constant([[f"{e.start_ending} {ending}" for ending in e.endings]
                                    for e in batch])}


def predict_sentences(serving, task: str, examples: list, batch_size: int) -> dict:
    """GLUE / SWAG examples -> {"prediction": class ids [N] or scores [N],
    "probabilities": [N, L] (not for regression)}."""
    spec = get_task(task)
    inputs = _swag_inputs if spec.kind == MULTIPLE_CHOICE else _sentence_inputs(spec)
    outputs = _serve(serving, examples, batch_size, inputs)
    if spec.kind == REGRESSION:
        return {"prediction": outputs["score"]}
    if spec.kind == CLASSIFICATION:
        ids = np.array([spec.labels.index(label.decode()) for label in outputs["label"]])
    else:
        ids = outputs["label"]
    return {"prediction": ids, "probabilities": outputs["probabilities"]}


def predict_squad(serving, task: str, examples: list, batch_size: int, vocab: list,
                  lower_case: bool, options: SquadOptions):
    """SQuAD examples -> `squad_postprocess.SquadPredictions` of the windows' logits."""
    parts, offset = [], 0
    for batch in _batches(examples, batch_size):
        out = serving(question=tf.constant([e.question_text for e in batch]),
                      context=tf.constant([e.context_text for e in batch]))
        out = {k: v.numpy() for k, v in out.items()}
        out["example_index"] = out["example_index"] + offset  # batch -> file numbering
        parts.append(out)
        offset += len(batch)
    windows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return squad_postprocess.postprocess(
        examples, windows, windows["start_logits"], windows["end_logits"], vocab, lower_case,
        version_2=task == "squad2.0", n_best_size=options.n_best_size,
        max_answer_length=options.max_answer_length,
        null_score_diff_threshold=options.null_score_diff_threshold)


def _write_jsonl(task: str, examples: list, result: dict, path: str) -> None:
    spec = get_task(task)
    with files.atomic_open(path) as f:
        for i, example in enumerate(examples):
            row = {"index": example.guid}
            if spec.kind == REGRESSION:
                row["prediction"] = float(result["prediction"][i])
            else:
                row["prediction"] = spec.labels[int(result["prediction"][i])]
                row["probabilities"] = dict(zip(spec.labels,
                                                map(float, result["probabilities"][i])))
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_squad_answers(task: str, result, path: str) -> list[str]:
    """{id: answer} at `path`; for v2.0 also the null odds beside it. Returns the paths."""
    files.write_json(path, result.predictions)
    if task != "squad2.0":
        return [path]
    null_odds = os.path.splitext(path)[0] + ".null_odds.json"
    files.write_json(null_odds, result.null_odds)
    return [path, null_odds]


def build_parser() -> argparse.ArgumentParser:
    squad = SquadOptions
    p = argparse.ArgumentParser(prog="python -m glue_suite.predict", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a glue_suite.run --export_dir directory")
    p.add_argument("--input_file", required=True)
    p.add_argument("--output_file", required=True, help="*.jsonl, else TSV (SQuAD: JSON)")
    p.add_argument("--batch_size", type=int, default=64, help="examples per call")
    p.add_argument("--n_best_size", type=int, default=squad.n_best_size)
    p.add_argument("--max_answer_length", type=int, default=squad.max_answer_length)
    p.add_argument("--null_score_diff_threshold", type=float,
                   default=squad.null_score_diff_threshold)
    return p


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    task, _, lower_case, vocab_file = read_task_file(args.model)
    check_output_file(args.output_file, "--output_file")
    examples, _ = readers.read_file(task, input_split(task), args.input_file)
    if not examples:
        raise InputError(args.input_file, None, "holds no examples")
    serving = tf.saved_model.load(args.model).signatures["serving_default"]
    if get_task(task).kind == SPAN:
        result = predict_squad(serving, task, examples, args.batch_size,
                               load_vocab(vocab_file), lower_case,
                               SquadOptions(args.n_best_size, args.max_answer_length,
                                            args.null_score_diff_threshold))
        written = write_squad_answers(task, result, args.output_file)
    else:
        result = predict_sentences(serving, task, examples, args.batch_size)
        if args.output_file.endswith(".jsonl"):
            _write_jsonl(task, examples, result, args.output_file)
        else:
            predictions.write_tsv(task, examples, result["prediction"], args.output_file)
        written = [args.output_file]
    print(f"{task}: {len(examples)} examples from {args.input_file} -> {', '.join(written)}")
    return 0


if __name__ == "__main__":
    run_main(main)
