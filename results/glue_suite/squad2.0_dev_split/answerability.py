"""Splits a SQuAD v2.0 run's score into span extraction and abstention.

    python results/glue_suite/squad2.0_dev_split/answerability.py runs/squad2_dev_split RUN_DIR

Scores RUN_DIR/best_non_null_predictions.json (every question answered with its best span;
glue_suite.run writes it for v2.0; the two runs here predate that, so theirs were taken from
nbest_predictions.json) with the official v2.0 metric, so HasAns_f1 is the span head's
quality alone, and reports how well null_odds.json ranks the unanswerable questions
(ROC AUC: 0.5 is chance, 1.0 a perfect threshold exists).
"""

import json
import os
import sys

from sklearn.metrics import roc_auc_score

from glue_suite import squad_eval


def main(split_dir, run_dir):
    with open(os.path.join(split_dir, "squad", "v2.0", "dev-v2.0.json")) as f:
        dataset = json.load(f)["data"]
    with open(os.path.join(run_dir, "best_non_null_predictions.json")) as f:
        answers = json.load(f)
    with open(os.path.join(run_dir, "null_odds.json")) as f:
        null_odds = json.load(f)
    dataset = squad_eval.select_questions(dataset, answers)
    answer_all = squad_eval.evaluate_v2(dataset, answers)  # no na_probs: nothing is null
    unanswerable = {qa["id"]: not qa["answers"] for article in dataset
                    for paragraph in article["paragraphs"] for qa in paragraph["qas"]}
    ids = sorted(null_odds)
    auc = roc_auc_score([unanswerable[q] for q in ids], [null_odds[q] for q in ids])
    print(json.dumps({"answer_everything": {k: answer_all[k] for k in
                                            ("exact", "f1", "HasAns_exact", "HasAns_f1")},
                      "null_odds_auc_unanswerable": auc}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])
