"""Held-out masked-LM accuracy of pretrained checkpoints by what the input shows at each
target: [MASK], the token itself (80/10/10 leaves 10% unchanged) or a random token.

Each checkpoint is converted to Hugging Face's layout (`bert_tf.convert --to hf`) and
scored by transformers' BertForPreTraining, independently of this project's model code,
on the first --batches batches of 64 held-out records.

    python results/pretraining/masked_lm_by_kind.py \\
        --records 'runs/cpu.data.heldout-nsp/part-*' \\
        runs/cpu.pretrain.tiny-nsp/export_1500 runs/cpu.pretrain.tiny-nsp/export

Prints the provenance header and, per checkpoint, the targets of each kind and the
accuracy on them; "hidden" is [MASK] + random, the targets the input does not show.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
import torch
from transformers import BertForPreTraining

from bert_tf import timing
from bert_tf.pretraining_dataset import feature_spec
from bert_tf.tokenization import load_vocab

BATCH_SIZE = 64


def to_huggingface(checkpoint: str, output_dir: str) -> None:
    subprocess.run([sys.executable, "-m", "bert_tf.convert", "--checkpoint", checkpoint,
                    "--to", "hf", "--output_dir", output_dir], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def huggingface_copies(checkpoints: list):
    """Each checkpoint with a temporary directory that holds it in Hugging Face's layout
    (removed when the next one is converted)."""
    for checkpoint in checkpoints:
        with tempfile.TemporaryDirectory() as hf_dir:
            to_huggingface(checkpoint, hf_dir)
            yield checkpoint, hf_dir


def batches(records: str, max_seq_length: int, max_predictions: int, count: int):
    spec = feature_spec(max_seq_length, max_predictions)
    dataset = (tf.data.TFRecordDataset(sorted(glob.glob(records)))
               .map(lambda record: tf.io.parse_single_example(record, spec))
               .batch(BATCH_SIZE).take(count))
    for batch in dataset.as_numpy_iterator():
        yield {name: torch.from_numpy(value.astype(np.int64)) for name, value in batch.items()}


def accuracy_by_kind(model, batches, mask_id: int) -> dict:
    """{kind: (correct, targets)} for kinds mask, same, random."""
    counts = {kind: [0, 0] for kind in ("mask", "same", "random")}
    for b in batches:
        with torch.no_grad():
            logits = model(input_ids=b["input_ids"], attention_mask=b["input_mask"],
                           token_type_ids=b["segment_ids"]).prediction_logits
        positions, labels = b["masked_lm_positions"], b["masked_lm_ids"]
        real = b["masked_lm_weights"] > 0
        correct = torch.gather(logits.argmax(-1), 1, positions) == labels
        shown = torch.gather(b["input_ids"], 1, positions)
        kinds = {"mask": shown == mask_id, "same": shown == labels,
                 "random": (shown != mask_id) & (shown != labels)}
        for kind, where in kinds.items():
            where = where & real
            counts[kind][0] += int(correct[where].sum())
            counts[kind][1] += int(where.sum())
    return counts


def checkpoints_parser(description: str, batches: int) -> argparse.ArgumentParser:
    """The arguments of a script that scores exported checkpoints on held-out records."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("checkpoints", nargs="+", help="exported checkpoint directories")
    p.add_argument("--records", required=True, help="held-out records (glob)")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--batches", type=int, default=batches, help="of 64 records each")
    return p


def main() -> None:
    args = checkpoints_parser(__doc__.split("\n\n")[0], batches=40).parse_args()
    print("\n".join(timing.header("results/pretraining/masked_lm_by_kind.py")))
    torch.set_num_threads(1)
    for checkpoint, hf_dir in huggingface_copies(args.checkpoints):
        model = BertForPreTraining.from_pretrained(hf_dir).eval()
        mask_id = load_vocab(os.path.join(hf_dir, "vocab.txt")).index("[MASK]")
        counts = accuracy_by_kind(model, batches(args.records, args.max_seq_length,
                                                 args.max_predictions_per_seq, args.batches),
                                  mask_id)
        total = sum(n for _, n in counts.values())
        counts["hidden"] = [counts["mask"][0] + counts["random"][0],
                            counts["mask"][1] + counts["random"][1]]
        counts["all"] = [sum(counts[k][0] for k in ("mask", "same", "random")), total]
        print(f"\n{checkpoint}")
        for kind, (correct, n) in counts.items():
            print(f"  {kind:7s} {n:6d} targets ({n / total:6.1%})  accuracy "
                  f"{correct / max(n, 1):6.1%}")


if __name__ == "__main__":
    main()
