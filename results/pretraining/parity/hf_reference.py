"""An independent pretraining reference: Hugging Face `BertForPreTraining` in PyTorch.

Trains on the same records, batches (read by our `make_pretraining_dataset` with the same
seed, so both see the same examples in the same order), config, schedule and steps as a
`bert_tf.pretrain` run, and evaluates the held-out masked-LM loss at the same steps, so
the two learning curves can be compared (`compare.py`). The recipe is the paper's, written
out independently of bert_tf: AdamW (beta 0.9/0.999, eps 1e-6, weight decay 0.01 except
LayerNorm and biases), linear warmup then linear decay to 0, global-norm clip 1.0, loss =
mean cross-entropy over the masked positions + NSP cross-entropy.

    python results/pretraining/parity/hf_reference.py --pretrain_config RUN/pretrain_config.json \
        --output_csv hf_metrics.csv [--seed 0]
"""

import argparse
import csv
import json
import math
import os
import sys

import numpy as np
import torch
import transformers

from bert_tf.pretraining_dataset import make_pretraining_dataset


def hf_model(bert_config: dict, seed: int) -> transformers.BertForPreTraining:
    """The run's architecture (pretrain_config.json's "bert_config") as a fresh HF model."""
    torch.manual_seed(seed)
    fields = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "hidden_act", "hidden_dropout_prob",
              "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
              "initializer_range", "layer_norm_eps")
    return transformers.BertForPreTraining(
        transformers.BertConfig(**{k: bert_config[k] for k in fields}))


def optimizer_and_schedule(model, learning_rate: float, warmup: int, total: int):
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if "LayerNorm" in name or name.endswith("bias") else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
    return optimizer, schedule


def to_torch(batch: dict) -> dict:
    """Our record batch -> HF inputs; MLM labels are -100 except at masked positions."""
    ids = torch.from_numpy(batch["input_ids"].numpy().astype(np.int64))
    labels = torch.full_like(ids, -100)
    positions = batch["masked_lm_positions"].numpy()
    targets = batch["masked_lm_ids"].numpy()
    weights = batch["masked_lm_weights"].numpy()
    rows, cols = np.nonzero(weights > 0)
    labels[rows, positions[rows, cols]] = torch.from_numpy(targets[rows, cols].astype(np.int64))
    return {"input_ids": ids,
            "attention_mask": torch.from_numpy(batch["input_mask"].numpy().astype(np.int64)),
            "token_type_ids": torch.from_numpy(batch["segment_ids"].numpy().astype(np.int64)),
            "labels": labels,
            "next_sentence_label": torch.from_numpy(
                batch["next_sentence_labels"].numpy().reshape(-1).astype(np.int64))}


def masked_lm_sums(model, inputs: dict) -> tuple:
    """(sum of cross-entropy, correct, count) over the masked positions of a batch."""
    out = model(**{k: v for k, v in inputs.items()
                   if k not in ("labels", "next_sentence_label")})
    logits, labels = out.prediction_logits, inputs["labels"]
    chosen = labels != -100
    loss = torch.nn.functional.cross_entropy(logits[chosen], labels[chosen], reduction="sum")
    correct = (logits[chosen].argmax(-1) == labels[chosen]).sum()
    return float(loss), int(correct), int(chosen.sum())


def evaluate(model, config: dict) -> dict:
    model.eval()
    dataset = make_pretraining_dataset(config["eval_files"], config["global_batch_size"],
                                       config["max_seq_length"],
                                       config["max_predictions_per_seq"], is_training=False)
    if config.get("eval_steps"):
        dataset = dataset.take(config["eval_steps"])
    loss = correct = count = 0
    with torch.no_grad():
        for batch in dataset:
            l, c, n = masked_lm_sums(model, to_torch(batch))
            loss, correct, count = loss + l, correct + c, count + n
    model.train()
    return {"mlm_loss": loss / count, "mlm_accuracy": correct / count}


def train(config: dict, seed: int, output_csv: str) -> None:
    steps, warmup = config["num_train_steps"], config["num_warmup_steps"]
    model = hf_model(config["bert_config"], seed)
    model.train()
    optimizer, schedule = optimizer_and_schedule(model, config["learning_rate"], warmup, steps)
    dataset = make_pretraining_dataset(config["train_files"], config["global_batch_size"],
                                       config["max_seq_length"],
                                       config["max_predictions_per_seq"], is_training=True,
                                       seed=config["seed"])
    eval_every = config["eval_every"] or steps
    rows = []
    for step, batch in enumerate(dataset.take(steps), start=1):
        loss = model(**to_torch(batch)).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % eval_every == 0 or step == steps:
            metrics = evaluate(model, config)
            rows.append({"step": step, "split": "eval", **metrics,
                         "mlm_perplexity": math.exp(metrics["mlm_loss"])})
            print(f"step {step}: held-out mlm_loss {metrics['mlm_loss']:.4f} "
                  f"acc {metrics['mlm_accuracy']:.4f}", flush=True)
    with open(output_csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pretrain_config", required=True,
                   help="pretrain_config.json of the bert_tf.pretrain run to mirror")
    p.add_argument("--output_csv", required=True)
    p.add_argument("--seed", type=int, default=0, help="model initialisation seed")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    with open(args.pretrain_config, encoding="utf-8") as f:
        config = json.load(f)
    if config["objective"] != "nsp" or config.get("phase2_train_files"):
        sys.exit("error: the reference covers the MLM + NSP objective, one phase")
    train(config, args.seed, args.output_csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
