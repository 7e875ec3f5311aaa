"""Split SQuAD v2.0 dev by article into a training half and an evaluation half.

../shared/data has no SQuAD v2.0 training set, and a model trained on v1.1 never sees an
unanswerable question (its best dev threshold just abstains: results/glue_suite/README.md).
To show the v2.0 null-answer path learning at all, this writes a data directory whose
squad/v2.0/train-v2.0.json holds the dev articles at odd (0-based) positions and
dev-v2.0.json those at even ones; training questions keep their first reference answer.
No article is in both halves, so no paragraph or question is both trained on and scored.
Scores on the even half are not comparable with the paper's (a different, smaller training
set and a different evaluation set).

    python results/glue_suite/squad2.0_dev_split/make_split.py $BERT_DATA_DIR runs/squad2_dev_split
"""
import copy
import json
import os
import sys


def main(data_dir: str, out_dir: str) -> None:
    with open(os.path.join(data_dir, "squad", "v2.0", "dev-v2.0.json"), encoding="utf-8") as f:
        dev = json.load(f)
    train = copy.deepcopy(dev["data"][1::2])
    for qa in (q for a in train for p in a["paragraphs"] for q in p["qas"]):
        # Dev questions carry up to 5 reference answers; training (as in the original
        # run_squad.py) takes exactly one, so keep the first, as the official train set has.
        qa["answers"] = qa["answers"][:1]
    halves = {"train-v2.0.json": train, "dev-v2.0.json": dev["data"][0::2]}
    os.makedirs(os.path.join(out_dir, "squad", "v2.0"), exist_ok=True)
    for name, articles in halves.items():
        with open(os.path.join(out_dir, "squad", "v2.0", name), "w", encoding="utf-8") as f:
            json.dump({"version": dev["version"], "data": articles}, f)
        questions = [q for a in articles for p in a["paragraphs"] for q in p["qas"]]
        print(f"{name}: {len(articles)} articles, {len(questions)} questions, "
              f"{sum(q['is_impossible'] for q in questions)} unanswerable")


if __name__ == "__main__":
    main(*sys.argv[1:3])
