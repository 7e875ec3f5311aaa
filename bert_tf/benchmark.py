"""Side-by-side throughput of this project's BERT and its peers, in one process.

    python -m bert_tf.benchmark --size base --seq_length 128 --batch_size 32 --mode train \
        --precision float32 --peers tfm,keras_hub,hf_torch

Every model runs the same work: `train` = forward, backward and an AdamW update of the
encoder plus a 2-way classification head on the pooled output (dropout on); `infer` =
the encoder's forward pass. Steps are interleaved round-robin after warm-up, so machine
noise hits every model alike; the median step time is reported. FLOPs count the matmuls
(2 * multiply-adds, backward = 2x forward); the matmul peak is measured here with one
large matmul in the same precision. "+RSS" is the resident memory each model added while
it was built, compiled and warmed up (they share one process). The last line is `ratio_vs_best_peer=X.XX`
(ours examples/s over the fastest peer's).
"""

import argparse
import os
import statistics
import threading
import time

import numpy as np
import psutil

from bert_tf.config import BertConfig, config_for_size


def training_flops_per_example(config: BertConfig, seq_length: int, train: bool) -> float:
    """Matmul FLOPs of one example: dense layers plus the two attention matmuls."""
    h, i, l, t = config.hidden_size, config.intermediate_size, config.num_hidden_layers, seq_length
    per_token = 2 * l * (4 * h * h + 2 * h * i) + 2 * l * 2 * t * h
    forward = per_token * t + 2 * h * h  # + pooler
    return 3 * forward if train else forward


def matmul_peak_gflops(precision: str, n: int = 2048, repeats: int = 10) -> float:
    import tensorflow as tf
    dtype = tf.bfloat16 if precision == "mixed_bfloat16" else tf.float32
    a = tf.random.normal((n, n), dtype=tf.float32)
    a = tf.cast(a, dtype)
    matmul = tf.function(lambda x: tf.matmul(x, x))
    matmul(a).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def random_batch(config, batch_size, seq_length, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, config.vocab_size, (batch_size, seq_length)).astype("int32")
    mask = np.ones_like(ids)
    mask[batch_size // 2:, seq_length * 3 // 4:] = 0  # some padding, as in real batches
    segments = (np.arange(seq_length)[None] >= seq_length // 2).astype("int32") * mask
    labels = rng.integers(0, 2, batch_size).astype("int32")
    return ids * mask, mask, segments, labels


# ---------------------------------------------------------------------------- runners
# Each returns a zero-argument callable that runs one step and blocks until it is done.
def _tf_step(encoder, head, inputs, labels, optimizer, variables, mode, jit_compile):
    """The shared step of the TensorFlow models: classification train step or encoder forward.
    `encoder(inputs, training)` must return a dict with "pooled_output" / "sequence_output"."""
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile)
    def train_step():
        with tf.GradientTape() as tape:
            logits = tf.cast(head(encoder(inputs, training=True)["pooled_output"], training=True),
                             tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    @tf.function(jit_compile=jit_compile)
    def infer_step():
        return encoder(inputs, training=False)["sequence_output"]

    step = train_step if mode == "train" else infer_step
    return lambda: step().numpy()


def ours(config, batch, mode, precision, jit_compile):
    import keras
    import tensorflow as tf
    from bert_tf.encoder import BertEncoder
    from bert_tf.heads import ClassificationHead
    ids, mask, segments, labels = (tf.constant(x) for x in batch)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    encoder = BertEncoder(config, dtype=precision)
    head = ClassificationHead(2, dtype=precision)
    optimizer = keras.optimizers.AdamW(1e-5, weight_decay=0.01, epsilon=1e-6)
    encoder.build()
    head.build((None, config.hidden_size))
    variables = encoder.trainable_variables + head.trainable_variables
    optimizer.build(variables)
    return _tf_step(encoder, head, inputs, labels, optimizer, variables, mode, jit_compile)


def tfm(config, batch, mode, precision, jit_compile):
    import tensorflow as tf
    import tf_keras
    from official.nlp.modeling.networks import BertEncoder as TfmBertEncoder
    tf_keras.mixed_precision.set_global_policy(precision)
    ids, mask, segments, labels = (tf.constant(x) for x in batch)
    encoder = TfmBertEncoder(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
        inner_dim=config.intermediate_size,
        inner_activation=lambda x: tf_keras.activations.gelu(x, approximate=False),
        output_dropout=0.1, attention_dropout=0.1, dict_outputs=True)
    head = tf_keras.Sequential([tf_keras.layers.Dropout(0.1), tf_keras.layers.Dense(2)])
    optimizer = tf_keras.optimizers.AdamW(1e-5, weight_decay=0.01, epsilon=1e-6)
    tf_keras.mixed_precision.set_global_policy("float32")
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments}
    encoder(inputs)
    head(encoder(inputs)["pooled_output"])
    variables = encoder.trainable_variables + head.trainable_variables
    return _tf_step(encoder, head, inputs, labels, optimizer, variables, mode, jit_compile)


def keras_hub(config, batch, mode, precision, jit_compile):
    import keras
    import keras_hub as kh
    import tensorflow as tf
    ids, mask, segments, labels = (tf.constant(x) for x in batch)
    backbone = kh.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size,
        dtype=precision)
    head = keras.Sequential([keras.layers.Dropout(0.1, dtype=precision),
                             keras.layers.Dense(2, dtype=precision)])
    inputs = {"token_ids": ids, "padding_mask": mask, "segment_ids": segments}
    head(backbone(inputs)["pooled_output"])
    variables = backbone.trainable_variables + head.trainable_variables
    optimizer = keras.optimizers.AdamW(1e-5, weight_decay=0.01, epsilon=1e-6)
    optimizer.build(variables)
    return _tf_step(backbone, head, inputs, labels, optimizer, variables, mode, jit_compile)


def hf_torch(config, batch, mode, precision, jit_compile):
    import torch
    import transformers
    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, num_labels=2)
    model = transformers.BertForSequenceClassification(hf_config)
    ids, mask, segments, labels = (torch.tensor(x, dtype=torch.long) for x in batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, eps=1e-6)
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16,
                                      enabled=precision == "mixed_bfloat16")

    def train_step():
        model.train()
        with autocast():
            loss = model(input_ids=ids, attention_mask=mask, token_type_ids=segments,
                         labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach().item()

    def infer_step():
        model.eval()
        with torch.no_grad(), autocast():
            return model.bert(input_ids=ids, attention_mask=mask,
                              token_type_ids=segments).last_hidden_state.float().sum().item()

    return train_step if mode == "train" else infer_step


RUNNERS = {"ours": ours, "tfm": tfm, "keras_hub": keras_hub, "hf_torch": hf_torch}


class PeakRss:
    """Samples the process RSS in a thread; `since_mark()` is the peak growth over the RSS at
    the last `mark()`. Models share one process, so each model's figure is the memory its
    building, compilation and warm-up steps added (weights, optimizer slots, activations)."""

    def __init__(self):
        self.process, self.stop = psutil.Process(), False
        self.base = self.peak = self.process.memory_info().rss
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while not self.stop:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.01)

    def mark(self):
        self.base = self.peak = self.process.memory_info().rss

    def since_mark(self):
        return max(self.peak, self.process.memory_info().rss) - self.base


def run(size, seq_length, batch_size, mode, precision, peers, warmup, rounds, jit_compile):
    config = config_for_size(size)
    batch = random_batch(config, batch_size, seq_length)
    flops = training_flops_per_example(config, seq_length, mode == "train") * batch_size
    peak = matmul_peak_gflops(precision)
    names = ["ours"] + [p for p in peers if p != "ours"]
    steps, times, rss = {}, {n: [] for n in names}, {}
    memory = PeakRss()
    for name in names:
        print(f"building {name} ...", flush=True)
        memory.mark()
        steps[name] = RUNNERS[name](config, batch, mode, precision, jit_compile)
        for _ in range(warmup):
            steps[name]()
        rss[name] = memory.since_mark()
    for r in range(rounds):
        for name in names:
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
        print(f"round {r + 1}/{rounds}: " + "  ".join(
            f"{n} {times[n][-1]:.2f}s" for n in names), flush=True)
    memory.stop = True
    rows = []
    for name in names:
        seconds = statistics.median(times[name])
        rows.append((name, batch_size / seconds, flops / seconds / 1e9, seconds))
    print(f"\n{size} seq={seq_length} batch={batch_size} mode={mode} precision={precision} "
          f"jit_compile={jit_compile} threads={os.cpu_count()} matmul_peak={peak:.0f} GFLOP/s")
    print(f"{'model':<10} {'examples/s':>11} {'GFLOP/s':>9} {'% peak':>7} {'step s':>8} "
          f"{'+RSS GiB':>9}")
    for name, eps, gflops, seconds in rows:
        print(f"{name:<10} {eps:>11.2f} {gflops:>9.1f} {100 * gflops / peak:>6.0f}% {seconds:>8.3f} "
              f"{rss[name] / 2 ** 30:>9.2f}")
    best_peer = max((eps for name, eps, _, _ in rows if name != "ours"), default=float("nan"))
    print(f"ratio_vs_best_peer={rows[0][1] / best_peer:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="base")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--precision", choices=["float32", "mixed_bfloat16"], default="float32")
    parser.add_argument("--peers", default="tfm,keras_hub,hf_torch",
                        help="comma-separated subset of " + ",".join(p for p in RUNNERS if p != "ours"))
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    # Off by default: on the CPUs measured here XLA made every TensorFlow model slower
    # (BERT-Base bf16 step 8.6 s with XLA, 5.2 s without; results/benchmark/README.md).
    parser.add_argument("--jit_compile", type=lambda s: s.lower() in ("1", "true", "yes"),
                        default=False, help="XLA-compile the TensorFlow models' steps (all of them)")
    args = parser.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in RUNNERS]
    if unknown:
        parser.error(f"unknown peers {unknown}; choose from {sorted(set(RUNNERS) - {'ours'})}")
    run(args.size, args.seq_length, args.batch_size, args.mode, args.precision, peers,
        args.warmup, args.rounds, args.jit_compile)


if __name__ == "__main__":
    main()
