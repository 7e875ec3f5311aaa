"""An independent pretraining reference: Hugging Face `BertForPreTraining` in PyTorch.

Trains on the same records, batches (read by our `make_pretraining_dataset` with the same
seed, so both see the same examples in the same order), config, schedule and steps as a
`bert_tf.pretrain` run, and evaluates the held-out masked-LM loss at the same steps, so
the two learning curves can be compared (`compare.py`). The recipe is the paper's, written
out independently of bert_tf: AdamW (beta 0.9/0.999, eps 1e-6, weight decay 0.01 except
LayerNorm and biases), linear warmup then linear decay to 0, global-norm clip 1.0, loss =
mean cross-entropy over the masked positions + NSP cross-entropy. A run in
mixed_bfloat16 is mirrored with bfloat16 autocast.

A left-to-right run (`--objective ltr`) is mirrored by `BertLMHeadModel` (is_decoder=True,
transformers' causal mask): each training sequence predicts the next token at
`ltr_predictions` positions drawn here, uniformly without replacement among those whose
next token is real (numpy, not the run's sampler); held-out loss over every next token.

    python results/pretraining/parity/hf_reference.py --pretrain_config RUN/pretrain_config.json \
        --output_csv hf_metrics.csv [--seed 0]

Without TensorFlow (a lent GPU), from the run's records dumped by `record_arrays.py`: the
same records, shuffled by numpy each epoch instead of by the run's tf.data pipeline, so
the curves compare as two runs of one recipe, not batch for batch:

    python results/pretraining/parity/hf_reference.py --pretrain_config RUN/pretrain_config.json \
        --arrays records.npz --device cuda --output_csv hf_metrics.csv
"""

import argparse
import csv
import json
import math
import os
import sys
import time

import numpy as np
import torch
import transformers

from record_arrays import load, record_batches  # beside this script


def hf_model(bert_config: dict, seed: int, objective: str = "nsp"):
    """The run's architecture (pretrain_config.json's "bert_config") as a fresh HF model:
    `BertForPreTraining`, or for "ltr" the left-to-right `BertLMHeadModel`."""
    torch.manual_seed(seed)
    fields = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "hidden_act", "hidden_dropout_prob",
              "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
              "initializer_range", "layer_norm_eps")
    config = transformers.BertConfig(**{k: bert_config[k] for k in fields},
                                      is_decoder=objective == "ltr")
    if objective == "ltr":
        return transformers.BertLMHeadModel(config)
    return transformers.BertForPreTraining(config)


def optimizer_and_schedule(model, learning_rate: float, warmup: int, total: int):
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if "LayerNorm" in name or name.endswith("bias") else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
    # Linear warmup to the peak, then linear decay to 0 at the last step.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup if step < warmup
        else max(0.0, (total - step) / max(1, total - warmup)))
    return optimizer, schedule


def to_torch(batch: dict, device: str) -> dict:
    """A batch of record features (numpy) -> HF inputs; MLM labels are -100 except at
    masked positions."""
    ids = torch.from_numpy(batch["input_ids"].astype(np.int64))
    labels = torch.full_like(ids, -100)
    positions, targets = batch["masked_lm_positions"], batch["masked_lm_ids"]
    rows, cols = np.nonzero(batch["masked_lm_weights"] > 0)
    labels[rows, positions[rows, cols]] = torch.from_numpy(targets[rows, cols].astype(np.int64))
    inputs = {"input_ids": ids,
              "attention_mask": torch.from_numpy(batch["input_mask"].astype(np.int64)),
              "token_type_ids": torch.from_numpy(batch["segment_ids"].astype(np.int64)),
              "labels": labels,
              "next_sentence_label": torch.from_numpy(
                  batch["next_sentence_labels"].reshape(-1).astype(np.int64))}
    return {k: v.to(device) for k, v in inputs.items()}


def array_batches(features: dict, batch_size: int, seed: int | None, training: bool):
    """Batches of dumped records: in order once, or reshuffled every epoch, forever."""
    count = len(features["input_ids"])
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(count) if training else np.arange(count)
        for start in range(0, count - batch_size + 1, batch_size):
            chosen = order[start:start + batch_size]
            yield {k: v[chosen] for k, v in features.items()}
        if not training:
            return


def next_token_targets(batch: dict, count: int | None, rng) -> tuple:
    """LTR: (rows, positions) whose hidden state predicts input_ids[row, position + 1]:
    `count` per sequence drawn uniformly without replacement among the positions whose
    next token is real (fewer where a sequence is shorter), or every such position when
    `count` is None."""
    predicts_real = batch["input_mask"][:, 1:] > 0  # [B, T - 1]
    if count is None:
        return np.nonzero(predicts_real)
    keys = np.where(predicts_real, rng.random(predicts_real.shape), -1.0)
    chosen = np.argsort(-keys, axis=1)[:, :count]  # real positions first, in random order
    rows = np.repeat(np.arange(len(keys)), chosen.shape[1])
    positions = chosen.reshape(-1)
    real = keys[rows, positions] >= 0
    return rows[real], positions[real]


def next_token_sums(model, batch: dict, device: str, count: int | None, rng) -> dict:
    """LTR sums over a batch: next-token cross-entropy (a tensor, for the backward pass),
    correct and count, at `next_token_targets`."""
    inputs = {k: v for k, v in to_torch(batch, device).items()
              if k in ("input_ids", "attention_mask", "token_type_ids")}
    rows, positions = (torch.from_numpy(a).to(device)
                       for a in next_token_targets(batch, count, rng))
    hidden = model.bert(**inputs).last_hidden_state  # [B, T, H]
    chosen = model.cls(hidden[rows, positions]).float()  # the LM head at the targets only
    labels = inputs["input_ids"][rows, positions + 1]
    return {"loss": torch.nn.functional.cross_entropy(chosen, labels, reduction="sum"),
            "correct": int((chosen.argmax(-1) == labels).sum()), "count": len(labels)}


def masked_lm_sums(model, inputs: dict) -> dict:
    """Sums over a batch: masked-LM cross-entropy, correct and count; NSP correct."""
    out = model(**{k: v for k, v in inputs.items()
                   if k not in ("labels", "next_sentence_label")})
    logits, labels = out.prediction_logits.float(), inputs["labels"]
    chosen = labels != -100
    loss = torch.nn.functional.cross_entropy(logits[chosen], labels[chosen], reduction="sum")
    nsp = out.seq_relationship_logits.argmax(-1) == inputs["next_sentence_label"]
    return {"loss": float(loss), "correct": int((logits[chosen].argmax(-1) ==
                                                 labels[chosen]).sum()),
            "count": int(chosen.sum()), "nsp_correct": int(nsp.sum()),
            "sequences": len(nsp)}


def evaluate_ltr(model, heldout_batches, device: str, autocast) -> dict:
    model.eval()
    totals = dict.fromkeys(("loss", "correct", "count"), 0)
    with torch.no_grad(), autocast():
        for batch in heldout_batches():
            for k, v in next_token_sums(model, batch, device, None, None).items():
                totals[k] += float(v)
    model.train()
    return {"mlm_loss": totals["loss"] / totals["count"],
            "mlm_accuracy": totals["correct"] / totals["count"]}


def evaluate(model, heldout_batches, device: str, autocast) -> dict:
    model.eval()
    totals = dict.fromkeys(("loss", "correct", "count", "nsp_correct", "sequences"), 0)
    with torch.no_grad(), autocast():
        for batch in heldout_batches():
            for k, v in masked_lm_sums(model, to_torch(batch, device)).items():
                totals[k] += v
    model.train()
    return {"mlm_loss": totals["loss"] / totals["count"],
            "mlm_accuracy": totals["correct"] / totals["count"],
            "nsp_accuracy": totals["nsp_correct"] / totals["sequences"]}


def train(config: dict, seed: int, output_csv: str, arrays: str | None, device: str) -> None:
    steps, warmup = config["num_train_steps"], config["num_warmup_steps"]
    ltr = config["objective"] == "ltr"
    model = hf_model(config["bert_config"], seed, config["objective"]).to(device)
    targets_rng = np.random.default_rng(seed)  # LTR: the positions each step predicts
    model.train()
    optimizer, schedule = optimizer_and_schedule(model, config["learning_rate"], warmup, steps)
    bfloat16 = config.get("precision") == "mixed_bfloat16"
    def autocast():
        return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16,
                              enabled=bfloat16)
    if arrays:
        train_features, heldout, _ = load(arrays)
        batch_size = config["global_batch_size"]
        batches = array_batches(train_features, batch_size, config["seed"], training=True)
        heldout_batches = lambda: array_batches(heldout, batch_size, None, training=False)
    else:
        batches = record_batches(config, "train", training=True, seed=config["seed"])
        heldout_batches = lambda: record_batches(config, "eval")
    eval_every = config["eval_every"] or steps
    rows, started = [], time.perf_counter()
    for step in range(1, steps + 1):
        with autocast():
            if ltr:
                sums = next_token_sums(model, next(batches), device,
                                       config["ltr_predictions"], targets_rng)
                loss = sums["loss"] / sums["count"]
            else:
                loss = model(**to_torch(next(batches), device)).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % eval_every == 0 or step == steps:
            metrics = (evaluate_ltr if ltr else evaluate)(model, heldout_batches, device,
                                                          autocast)
            rows.append({"step": step, "split": "eval", **metrics,
                         "mlm_perplexity": math.exp(metrics["mlm_loss"]),
                         "train_loss": loss.item(),
                         "elapsed_seconds": round(time.perf_counter() - started, 1)})
            print(f"step {step}: held-out mlm_loss {metrics['mlm_loss']:.4f} "
                  f"acc {metrics['mlm_accuracy']:.4f} nsp {metrics.get('nsp_accuracy')}",
                  flush=True)
            write_csv(rows, output_csv)  # every evaluation: a stopped run keeps its curve


def write_csv(rows: list, path: str) -> None:
    with open(path, "w", newline="") as f:
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
    p.add_argument("--arrays", help="the run's records dumped by record_arrays.py "
                   "(no TensorFlow needed); default: read the records themselves")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    with open(args.pretrain_config, encoding="utf-8") as f:
        config = json.load(f)
    if config["objective"] == "no_nsp" or config.get("phase2_train_files"):
        sys.exit("error: the reference covers the MLM + NSP and LTR objectives, one phase")
    if config["objective"] == "ltr" and not config.get("ltr_predictions"):
        sys.exit("error: an LTR run to mirror needs --ltr_predictions (its targets per sequence)")
    train(config, args.seed, args.output_csv, args.arrays, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
