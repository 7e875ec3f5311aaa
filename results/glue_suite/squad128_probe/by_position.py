"""SQuAD v1.1 dev F1 of committed fine-tuning runs, split by where the gold answer sits
in its window: inside the first 128 positions, the ones the cpu plan's pretraining (128-
token sequences) trained, or beyond them, whose position embeddings no pretraining step
updated (fine-tuning is at max_seq_length 384).

    BERT_DATA_DIR=../shared/data python results/glue_suite/squad128_probe/by_position.py \
        results/runs/cpu.finetune.tiny-*-1408k.squad1.1*

Every restart of every run is scored; each bucket's F1 is the official v1.1 F1 over its
questions. The answer's position is that of its first gold answer's start token in the
window where that token has the most context, as prediction picks it.
"""
import copy
import glob
import json
import os
import sys

import numpy as np

from bert_tf.tokenization import BertTokenizer
from glue_suite import features, squad_eval, squad_readers

PRETRAINED_POSITIONS = 128
DEV = "squad/v1.1/dev-v1.1.json"
VOCAB = "bert_vocab/bert-base-uncased/vocab.txt"


def answer_positions(articles: list, vocab_file: str) -> dict:
    """question id -> position of its first gold answer's start token in its window."""
    first_answers = copy.deepcopy(articles)
    for article in first_answers:  # a training example has one answer: the first gold one
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    examples, _ = squad_readers.squad_examples(first_answers, version_2=False, training=True)
    settings = features.FeatureSettings(max_seq_length=384, doc_stride=128,
                                        max_query_length=64)
    windows = features.squad_features("squad1.1", examples,
                                      BertTokenizer(vocab_file, lower_case=True), settings,
                                      training=True)
    positions = {}
    for i, start, is_max in zip(windows["example_index"], windows["start_positions"],
                                windows["token_is_max_context"]):
        if start and is_max[start]:  # the window that holds the answer with most context
            positions[examples[i].qas_id] = int(start)
    return positions


def f1_by_bucket(gold: dict, predictions: dict, positions: dict) -> tuple[dict, dict]:
    """({bucket: F1}, {bucket: questions}) of one restart's predictions."""
    buckets = {"< 128": [], ">= 128": []}
    for qid, position in positions.items():
        f1 = max(squad_eval.f1_v1(predictions.get(qid, ""), g) for g in gold[qid])
        buckets["< 128" if position < PRETRAINED_POSITIONS else ">= 128"].append(f1)
    return ({k: 100 * float(np.mean(v)) for k, v in buckets.items()},
            {k: len(v) for k, v in buckets.items()})


def main(run_dirs):
    data_dir = os.environ["BERT_DATA_DIR"]
    dev = squad_readers.load_squad_json(os.path.join(data_dir, DEV))["data"]
    positions = answer_positions(dev, os.path.join(data_dir, VOCAB))
    gold = {qa["id"]: [a["text"] for a in qa["answers"]]
            for article in dev for p in article["paragraphs"] for qa in p["qas"]}
    counts = None
    print(f"{'run':32s} {'rate':>8s}  F1, answer < 128  F1, answer >= 128   gap")
    for run in run_dirs:
        by_rate = {}
        for path in sorted(glob.glob(os.path.join(run, "files/restarts/*/predictions.json"))):
            rate = os.path.basename(os.path.dirname(path)).split("-seed")[0]
            f1, counts = f1_by_bucket(gold, json.load(open(path)), positions)
            by_rate.setdefault(rate, []).append(f1)
        for rate, runs in by_rate.items():
            low = np.array([r["< 128"] for r in runs])
            high = np.array([r[">= 128"] for r in runs])
            name = os.path.basename(run.rstrip("/")).removeprefix("cpu.finetune.")
            print(f"{name:32s} {rate:>8s}  {low.mean():5.1f} +- {low.std():3.1f}"
                  f"      {high.mean():5.1f} +- {high.std():3.1f}      "
                  f"{(low - high).mean():+5.1f}")
    print(f"questions: {counts['< 128']} with the answer < 128, {counts['>= 128']} >= 128 "
          f"(mean +- std over the restarts at each rate); {len(gold) - len(positions)} of "
          f"{len(gold)} left out (first answer not aligned)")


if __name__ == "__main__":
    main(sys.argv[1:])
