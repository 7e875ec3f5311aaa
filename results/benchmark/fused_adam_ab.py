"""A/B of the fused Adam update (`bert_tf.optimization.AdamW`) against Keras's AdamW,
on the two steps the cpu reproduction spends its time on, in one process, rounds rotated:

  finetune  the shipped MiniLM's size (L6/H384) + a 2-way head, batch 32 x 24 tokens
            (an SST-2 batch as length bucketing cuts it), float32, clipping 1.0
  pretrain  BERT-Tiny's compiled pretraining step (`Trainer`, MLM + NSP, batch 64 x 128,
            mixed_bfloat16) on one batch of the records held in memory

    python results/benchmark/fused_adam_ab.py --train_files 'RECORDS/part-*' \\
        --vocab_file VOCAB --rounds 8

Prints the provenance header, each contender's median steps/s with its min-max, and
fused / keras per step with a 95% bootstrap interval over rounds.
"""

import tempfile

import keras
import tensorflow as tf
from mlm_xent_ab import parse_args

from bert_tf import distribute, optimization, timing
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from bert_tf.heads import ClassificationHead
from bert_tf.pretrain_config import PretrainConfig
from bert_tf.trainer import Trainer


def with_optimizer(cls, build):
    """build() with create_optimizer making `cls` instead of the fused AdamW."""
    fused = optimization.AdamW
    optimization.AdamW = cls
    try:
        return build()
    finally:
        optimization.AdamW = fused


def finetune_step(steps: int):
    config = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536)
    encoder, head = BertEncoder(config), ClassificationHead(2, 0.1)
    encoder.build()
    head.build((None, config.hidden_size))
    variables = encoder.trainable_variables + head.trainable_variables
    optimizer = optimization.create_optimizer(1e-4, 1000, 100, clipnorm=1.0)
    optimizer.build(variables)
    ids = tf.random.stateless_uniform((32, 24), (0, 0), 999, config.vocab_size, tf.int32)
    inputs = {"input_ids": ids, "input_mask": tf.ones_like(ids),
              "segment_ids": tf.zeros_like(ids)}
    labels = tf.zeros((32,), tf.int32)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = head(encoder(inputs, training=True)["pooled_output"], training=True)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    return lambda: [step().numpy() for _ in range(steps)]


def pretrain_step(args, model_dir: str):
    config = PretrainConfig(
        model_size="tiny", objective="nsp", train_files=args.train_files,
        vocab_file=args.vocab_file, model_dir=model_dir, global_batch_size=64,
        max_seq_length=128, max_predictions_per_seq=20, num_train_steps=1_000_000,
        num_warmup_steps=10_000, precision="mixed_bfloat16")
    trainer = Trainer(config, distribute.create_strategy("cpu"))
    trainer.restore()
    batch = next(trainer.iterators[0])
    in_memory = [iter(tf.data.Dataset.from_tensors(batch).repeat())]
    return lambda: trainer.run_steps(args.steps, in_memory)


def main():
    args = parse_args(__doc__)
    print("\n".join(timing.header("results/benchmark/fused_adam_ab.py")), flush=True)
    with tempfile.TemporaryDirectory() as model_dir:
        contenders = {}
        for name, cls in (("fused", optimization.AdamW), ("keras", keras.optimizers.AdamW)):
            contenders[f"finetune {name}"] = with_optimizer(cls, lambda: finetune_step(args.steps))
            contenders[f"pretrain {name}"] = with_optimizer(
                cls, lambda: pretrain_step(args, f"{model_dir}/{name}"))
        for contender in contenders.values():
            contender()  # warm-up: tracing
        seconds = timing.run_rounds(contenders, args.rounds, log=lambda s: print(s, flush=True))
    rates = {name: [args.steps / s for s in values] for name, values in seconds.items()}
    for name, values in rates.items():
        median, low, high = timing.spread(values)
        print(f"{name:<16} {median:7.2f} steps/s ({low:.2f}-{high:.2f})")
    for step in ("finetune", "pretrain"):
        ratio, low, high = timing.bootstrap_ratio(rates[f"{step} fused"], rates[f"{step} keras"])
        print(f"{step}: fused / keras steps/s = {ratio:.3f} (95% CI {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
