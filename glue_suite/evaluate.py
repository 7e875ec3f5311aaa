"""Scores a predictions file against a labelled data file; prints the metrics as JSON.

SQuAD (same inputs and numbers as the official evaluate-v1.1.py / evaluate-v2.0.py):

    python -m glue_suite.evaluate --task squad1.1 --data_file dev-v1.1.json \\
        --predictions predictions.json
    python -m glue_suite.evaluate --task squad2.0 --data_file dev-v2.0.json \\
        --predictions predictions.json --na_prob_file null_odds.json

GLUE and SWAG (the data file in its usual layout, e.g. glue_data/MRPC/dev.tsv,
multinli_1.0/multinli_1.0_dev_matched.csv, swag/val.csv):

    python -m glue_suite.evaluate --task mrpc --data_file dev.tsv --predictions preds.tsv
"""

import argparse
import json

import numpy as np

from bert_tf.cli import InputError, run_main
from glue_suite import metrics, predictions, readers, squad_eval, squad_readers
from glue_suite.tasks import (CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION, SPAN, TASKS, TOKEN,
                              get_task)

_PREDICTIONS_HELP = """\
SQuAD: JSON {question id: answer text} ("" = no answer, v2.0). Other tasks: a
tab-separated file with the header line "index<TAB>prediction" and one row per example
of --data_file: the example's index (the data file's `index` column, `id` for QQP;
else the 0-based data-row number, counting MultiNLI rows without a gold label out)
and the predicted label string as it appears in the data (CoLA/SST-2/MRPC/QQP/WNLI:
0 or 1; MNLI: entailment/neutral/contradiction; QNLI/RTE: entailment/not_entailment;
SWAG: 0-3) or, for STS-B, the predicted score. This is the GLUE leaderboard format,
as written by glue_suite.predictions.write_tsv (the runner writes dev predictions
the same way)."""


def score_squad(task: str, data_file: str, predictions_file: str,
                na_prob_file: str = None, na_prob_thresh: float = 1.0) -> dict:
    """Official SQuAD metrics of a predictions JSON file."""
    dataset = squad_readers.load_squad_json(data_file)["data"]
    answers = predictions.read_squad(predictions_file)
    if task == "squad1.1":
        if na_prob_file:
            raise InputError(na_prob_file, None, "--na_prob_file is for squad2.0 only")
        return squad_eval.evaluate_v1(dataset, answers)
    na_probs = predictions.read_null_odds(na_prob_file) if na_prob_file else None
    return squad_eval.evaluate_v2(dataset, answers, na_probs, na_prob_thresh)


def score_predictions_file(task: str, data_file: str, predictions_file: str) -> dict:
    """Metrics of an `index<TAB>prediction` file against a labelled GLUE/SWAG file."""
    spec = get_task(task)
    if spec.kind not in (CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE):
        raise ValueError(f"task {task}: only GLUE, SWAG and SQuAD predictions are scored here")
    examples, _ = readers.read_file(task, "dev", data_file)
    predicted = predictions.read_tsv(task, predictions_file)
    guids = [ex.guid for ex in examples]
    missing = [g for g in guids if g not in predicted]
    unknown = sorted(set(predicted) - set(guids))
    if missing or unknown:
        raise InputError(
            predictions_file, None, f"{len(missing)} examples of {data_file} have no "
            f"prediction (e.g. {missing[:3]}) and {len(unknown)} predictions have an index "
            f"not in it (e.g. {unknown[:3]})")
    values = [predicted[g] for g in guids]
    if spec.kind == REGRESSION:
        ids_or_scores = np.array(values, dtype=np.float64)
    else:
        ids_or_scores = np.array([spec.labels.index(v) for v in values], dtype=np.int64)
    return metrics.compute_metrics(task, ids_or_scores, readers.example_labels(task, examples))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m glue_suite.evaluate", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    scored = [t for t, s in TASKS.items() if s.kind != TOKEN]
    parser.add_argument("--task", required=True, choices=scored)
    parser.add_argument("--data_file", required=True,
                        help="labelled file: SQuAD dev JSON (.json or .json.gz), GLUE dev "
                             "TSV, MultiNLI dev CSV or SWAG val.csv")
    parser.add_argument("--predictions", required=True, help=_PREDICTIONS_HELP)
    parser.add_argument("--na_prob_file", default=None,
                        help="squad2.0: JSON {question id: no-answer score} (BERT's "
                             "null_odds.json); adds the best-threshold search")
    parser.add_argument("--na_prob_thresh", type=float, default=1.0,
                        help="squad2.0: predict no-answer when na_prob exceeds this "
                             "(official default 1.0)")
    args = parser.parse_args(argv)
    # Bad or missing input raises InputError or OSError: run_main prints one line.
    if get_task(args.task).kind == SPAN:
        result = score_squad(args.task, args.data_file, args.predictions,
                             args.na_prob_file, args.na_prob_thresh)
    else:
        result = score_predictions_file(args.task, args.data_file, args.predictions)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    run_main(main)
