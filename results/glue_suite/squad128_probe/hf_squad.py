"""An independent SQuAD v1.1 fine-tuning reference: Hugging Face `BertForQuestionAnswering`.

Fine-tunes a checkpoint converted to transformers' layout (`python -m bert_tf.convert --to
hf`; a causal "LTR" model becomes is_decoder=True, so BertModel keeps its left-only mask)
on the same training questions as `glue_suite.run --max_train_examples N` (its reader and
seeded subset), with the recipe of transformers' run_qa.py written out in plain PyTorch:
the fast tokenizer's windows (question first, truncation="only_second", offsets),
answer-out-of-window windows labelled at [CLS], AdamW (weight decay 0.01 off biases and
LayerNorm), linear warmup (10%) and decay, clip 1.0, dropout 0.1, then run_qa's
post-processing (the 20 best starts and ends, answers of at most 30 tokens inside the
context, the best start + end logit over a question's windows) and the official v1.1
scorer. Nothing of glue_suite's featurizing, model, training or post-processing runs.

    python -m bert_tf.convert --checkpoint runs/cpu.pretrain.tiny-ltr-960k/export --to hf \
        --output_dir runs/probe_squad128/hf_ltr
    python results/glue_suite/squad128_probe/hf_squad.py --checkpoint runs/probe_squad128/hf_ltr \
        --data_dir ../shared/data --learning_rate 3e-4 --seed 0 --output_json metrics.json
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import transformers

from glue_suite import readers, squad_eval
from glue_suite.run import subsample
from glue_suite.tasks import get_task


def answer_char_span(example) -> tuple[int, int]:
    """The training answer as [start, end) characters of the context (the whitespace
    tokens the reader aligned it to)."""
    words = np.asarray(example.char_to_word_offset)
    chars = np.flatnonzero((words >= example.start_position) & (words <= example.end_position))
    return int(chars[0]), int(chars[-1]) + 1


def windows(tokenizer, questions, contexts, args):
    return tokenizer(questions, contexts, truncation="only_second",
                     max_length=args.max_seq_length, stride=args.stride,
                     return_overflowing_tokens=True, return_offsets_mapping=True,
                     padding="max_length", return_tensors="np")


def training_windows(tokenizer, examples, args) -> dict:
    """Input ids, masks, type ids and start/end labels of every training window."""
    enc = windows(tokenizer, [e.question_text for e in examples],
                  [e.context_text for e in examples], args)
    starts, ends = [], []
    for i, example_index in enumerate(enc["overflow_to_sample_mapping"]):
        first, last = answer_char_span(examples[example_index])
        sequence_ids = enc.sequence_ids(i)
        context = [t for t, s in enumerate(sequence_ids) if s == 1]
        offsets = enc["offset_mapping"][i]
        if offsets[context[0]][0] > first or offsets[context[-1]][1] < last:
            starts.append(0)  # the answer is not (wholly) in this window
            ends.append(0)
            continue
        starts.append(next(t for t in context if offsets[t][1] > first))
        ends.append(next(t for t in reversed(context) if offsets[t][0] < last))
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "token_type_ids": enc["token_type_ids"],
            "start_positions": np.array(starts), "end_positions": np.array(ends)}


def train(model, data: dict, args) -> float:
    """The run_qa recipe; returns the mean loss of the last 100 steps."""
    n = len(data["input_ids"])
    steps_per_epoch = -(-n // args.batch_size)
    total = steps_per_epoch * args.epochs
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if "LayerNorm" in name or name.endswith("bias") else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.learning_rate, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)
    rng = np.random.default_rng(args.seed)
    tensors = {k: torch.from_numpy(v).long() for k, v in data.items()}
    losses = []
    model.train()
    for epoch in range(args.epochs):
        order = torch.from_numpy(rng.permutation(n))
        for step in range(steps_per_epoch):
            rows = order[step * args.batch_size:(step + 1) * args.batch_size]
            loss = model(**{k: v[rows] for k, v in tensors.items()}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        print(f"epoch {epoch + 1}/{args.epochs}: mean loss {np.mean(losses[-steps_per_epoch:]):.4f}",
              flush=True)
    return float(np.mean(losses[-100:]))


def predict(model, tokenizer, examples, args) -> dict[str, str]:
    """run_qa's post-processing: question id -> the best span's text over its windows."""
    enc = windows(tokenizer, [e.question_text for e in examples],
                  [e.context_text for e in examples], args)
    model.eval()
    starts, ends = [], []
    with torch.no_grad():
        for i in range(0, len(enc["input_ids"]), 256):
            out = model(**{k: torch.from_numpy(enc[k][i:i + 256]).long()
                           for k in ("input_ids", "attention_mask", "token_type_ids")})
            starts.append(out.start_logits.numpy())
            ends.append(out.end_logits.numpy())
    starts, ends = np.concatenate(starts), np.concatenate(ends)
    best = {}  # example index -> (score, text)
    for i, example_index in enumerate(enc["overflow_to_sample_mapping"]):
        context = examples[example_index].context_text
        is_context = np.array([s == 1 for s in enc.sequence_ids(i)])
        offsets = enc["offset_mapping"][i]
        best_ends = np.argsort(ends[i])[::-1][:20]
        for s in np.argsort(starts[i])[::-1][:20]:
            for e in best_ends:
                if not (is_context[s] and is_context[e]) or e < s or e - s + 1 > 30:
                    continue
                score = starts[i][s] + ends[i][e]
                if score > best.get(example_index, (-np.inf, ""))[0]:
                    best[example_index] = (score, context[offsets[s][0]:offsets[e][1]])
    return {e.qas_id: best.get(i, (0, ""))[1] for i, e in enumerate(examples)}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="a transformers model directory")
    p.add_argument("--data_dir", required=True)
    p.add_argument("--max_train_examples", type=int, default=10000)
    p.add_argument("--learning_rate", type=float, default=3e-4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--stride", type=int, default=48,
                   help="tokens shared by neighbouring windows (transformers' convention; "
                        "glue_suite's --doc_stride 64 is the step between window starts, "
                        "~46 tokens of overlap at 128 with a typical question)")
    p.add_argument("--max_eval_examples", type=int, default=None,
                   help="score the first N dev questions only (a smoke test)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--output_json", required=True)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    transformers.set_seed(args.seed)
    began = time.time()

    train_examples, _ = readers.read_examples("squad1.1", "train", args.data_dir)
    train_examples = subsample(train_examples, args.max_train_examples,
                               get_task("squad1.1").kind)
    dev_path = readers.data_path("squad1.1", "dev", args.data_dir)
    dev_articles = readers.load_squad_json(dev_path)["data"]
    dev_examples, _ = readers.squad_examples(dev_articles, version_2=False, training=False)
    dev_examples = dev_examples[:args.max_eval_examples]

    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.checkpoint)
    model = transformers.BertForQuestionAnswering.from_pretrained(
        args.checkpoint, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    data = training_windows(tokenizer, train_examples, args)
    final_loss = train(model, data, args)
    predictions = predict(model, tokenizer, dev_examples, args)
    dev = squad_eval.select_questions(dev_articles, predictions)
    metrics = squad_eval.evaluate_v1(dev, predictions)
    result = {"checkpoint": os.path.basename(os.path.normpath(args.checkpoint)),
              "is_decoder": model.config.is_decoder, "metrics": metrics,
              "train_examples": len(train_examples), "train_windows": len(data["input_ids"]),
              "final_loss_last_100_steps": final_loss, "seconds": round(time.time() - began),
              "transformers": transformers.__version__, "torch": torch.__version__,
              **{k: v for k, v in vars(args).items() if k not in ("checkpoint", "data_dir",
                                                                 "output_json")}}
    print(json.dumps(result, indent=1))
    with open(args.output_json, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
