"""Side-by-side encoder throughput of this project's BERT and its peers, in one process.

    python -m bert_tf.benchmark --size base --seq_length 128 --batch_size 32 --mode train \\
        --precision float32 --peers tfm,keras_hub,hf_torch --rounds 8

Every model runs the same work: `train` = forward, backward and an AdamW update (lr 1e-5,
weight decay 0.01 on every variable, epsilon 1e-6) of the encoder plus a 2-way
classification head on the pooled output, dropout 0.1 everywhere, exact (erf) GELU;
`infer` = the encoder's forward pass. Each model trains with its own library's AdamW:
ours with `bert_tf.optimization.AdamW` (Keras's, its Adam update fused), what
`bert_tf.pretrain` and `glue_suite` train with. `Peer.facts` reads these settings back from each
built model, and tests/test_benchmark.py checks that they and the parameter counts agree.
keras-hub's BERT uses the tanh GELU; its feed-forward activation is set to the exact one
here so that it does the same computation.

Timing (`timing`): after warm-up, rounds run every model once, in an order rotated every
round; the table gives each model's median examples/s and its min-max over the rounds,
and the last line the ratio of ours to the best peer (highest median) with a 95%
bootstrap interval over rounds. FLOPs count the matmuls (2 * multiply-adds, backward =
2x forward); the matmul peak is one large matmul in the same precision, measured here.
"+RSS" is the resident memory each model added while it was built, compiled and warmed
up (they share one process; the first also pays TensorFlow's one-time set-up).
"""

import argparse
import dataclasses
import os
import threading
import time
from typing import Callable

import numpy as np
import psutil

from bert_tf import timing
from bert_tf.config import BertConfig, config_for_size

LEARNING_RATE, WEIGHT_DECAY, EPSILON, DROPOUT = 1e-5, 0.01, 1e-6, 0.1


@dataclasses.dataclass
class Peer:
    """A built model's step and what it computes, read back from the model itself.

    step: runs one step and waits for it. num_parameters: trainable parameters
    (encoder + head). facts: {"hidden_dropout", "attention_dropout", "head_dropout",
    "activation_at_1" (the feed-forward activation at x = 1: 0.8413 exact GELU, 0.8412
    tanh), "optimizer" (lr, weight decay, epsilon)}.
    """
    step: Callable[[], object]
    num_parameters: int
    facts: dict


def training_flops_per_example(config: BertConfig, seq_length: int, train: bool) -> float:
    """Matmul FLOPs of one example: dense layers plus the two attention matmuls."""
    h, i, l, t = config.hidden_size, config.intermediate_size, config.num_hidden_layers, seq_length
    per_token = 2 * l * (4 * h * h + 2 * h * i) + 2 * l * 2 * t * h
    forward = per_token * t + 2 * h * h  # + pooler
    return 3 * forward if train else forward


def matmul_peak_gflops(precision: str, n: int = 2048, repeats: int = 10) -> float:
    import tensorflow as tf
    dtype = tf.bfloat16 if precision == "mixed_bfloat16" else tf.float32
    a = tf.cast(tf.random.normal((n, n), dtype=tf.float32), dtype)
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
    first = min(1000, config.vocab_size // 2)  # past the special tokens
    ids = rng.integers(first, config.vocab_size, (batch_size, seq_length)).astype("int32")
    mask = np.ones_like(ids)
    mask[batch_size // 2:, seq_length * 3 // 4:] = 0  # some padding, as in real batches
    segments = (np.arange(seq_length)[None] >= seq_length // 2).astype("int32") * mask
    labels = rng.integers(0, 2, batch_size).astype("int32")
    return ids * mask, mask, segments, labels


def _activation_at_1(activation) -> float:
    import tensorflow as tf
    return round(float(activation(tf.constant([1.0]))[0]), 6)


def _optimizer_facts(learning_rate, weight_decay, epsilon) -> tuple:
    """To 6 significant digits: Keras keeps the learning rate in float32."""
    return tuple(float(f"{float(x):.6g}") for x in (learning_rate, weight_decay, epsilon))


def _keras_optimizer_facts(optimizer) -> tuple:
    return _optimizer_facts(optimizer.learning_rate, optimizer.weight_decay, optimizer.epsilon)


# ---------------------------------------------------------------------------- runners
# Each builds one model and returns its Peer.
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


def _count(variables) -> int:
    return int(sum(np.prod(v.shape) for v in variables))


def ours(config, batch, mode, precision, jit_compile) -> Peer:
    import tensorflow as tf
    from bert_tf.encoder import BertEncoder
    from bert_tf.heads import ClassificationHead
    from bert_tf.optimization import AdamW
    ids, mask, segments, labels = (tf.constant(x) for x in batch)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    encoder = BertEncoder(config, dtype=precision)
    head = ClassificationHead(2, DROPOUT, dtype=precision)
    optimizer = AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=EPSILON)
    encoder.build()
    head.build((None, config.hidden_size))
    variables = encoder.trainable_variables + head.trainable_variables
    optimizer.build(variables)
    block = encoder.blocks[0]
    facts = {"hidden_dropout": block.dropout_layer.rate,
             "attention_dropout": block.attention.dropout_layer.rate,
             "head_dropout": head.dropout_layer.rate,
             "activation_at_1": _activation_at_1(block.intermediate.activation),
             "optimizer": _keras_optimizer_facts(optimizer)}
    return Peer(_tf_step(encoder, head, inputs, labels, optimizer, variables, mode, jit_compile),
                _count(variables), facts)


def tfm(config, batch, mode, precision, jit_compile) -> Peer:
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
        output_dropout=DROPOUT, attention_dropout=DROPOUT, dict_outputs=True)
    head = tf_keras.Sequential([tf_keras.layers.Dropout(DROPOUT), tf_keras.layers.Dense(2)])
    optimizer = tf_keras.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=EPSILON)
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments}
    head(encoder(inputs)["pooled_output"])  # builds the head in the global policy
    tf_keras.mixed_precision.set_global_policy("float32")
    variables = encoder.trainable_variables + head.trainable_variables
    settings = encoder.get_config()
    facts = {"hidden_dropout": settings["output_dropout"],
             "attention_dropout": settings["attention_dropout"],
             "head_dropout": head.layers[0].rate,
             "activation_at_1": _activation_at_1(
                 encoder.transformer_layers[0]._intermediate_activation_layer),
             "optimizer": _keras_optimizer_facts(optimizer)}
    return Peer(_tf_step(encoder, head, inputs, labels, optimizer, variables, mode, jit_compile),
                _count(variables), facts)


def keras_hub(config, batch, mode, precision, jit_compile) -> Peer:
    import keras
    import keras_hub as kh
    import tensorflow as tf
    ids, mask, segments, labels = (tf.constant(x) for x in batch)
    backbone = kh.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=DROPOUT,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size,
        dtype=precision)
    for layer in backbone.transformer_layers:  # keras-hub's BERT uses the tanh GELU
        layer._feedforward_intermediate_dense.activation = \
            lambda x: keras.activations.gelu(x, approximate=False)
    head = keras.Sequential([keras.layers.Dropout(DROPOUT, dtype=precision),
                             keras.layers.Dense(2, dtype=precision)])
    inputs = {"token_ids": ids, "padding_mask": mask, "segment_ids": segments}
    head(backbone(inputs)["pooled_output"])
    variables = backbone.trainable_variables + head.trainable_variables
    optimizer = keras.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=EPSILON)
    optimizer.build(variables)
    layer = backbone.transformer_layers[0]
    facts = {"hidden_dropout": layer._feedforward_dropout.rate,
             "attention_dropout": layer._self_attention_layer.dropout,
             "head_dropout": head.layers[0].rate,
             "activation_at_1": _activation_at_1(
                 layer._feedforward_intermediate_dense.activation),
             "optimizer": _keras_optimizer_facts(optimizer)}
    return Peer(_tf_step(backbone, head, inputs, labels, optimizer, variables, mode, jit_compile),
                _count(variables), facts)


def hf_torch(config, batch, mode, precision, jit_compile) -> Peer:
    import torch
    import transformers
    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_dropout_prob=DROPOUT,
        attention_probs_dropout_prob=DROPOUT, hidden_act="gelu",
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, num_labels=2)
    model = transformers.BertForSequenceClassification(hf_config)
    ids, mask, segments, labels = (torch.tensor(x, dtype=torch.long) for x in batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE,
                                  weight_decay=WEIGHT_DECAY, eps=EPSILON)
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

    group = optimizer.param_groups[0]
    activation = model.bert.encoder.layer[0].intermediate.intermediate_act_fn
    facts = {"hidden_dropout": hf_config.hidden_dropout_prob,
             "attention_dropout": hf_config.attention_probs_dropout_prob,
             "head_dropout": model.dropout.p,
             "activation_at_1": round(float(activation(torch.tensor([1.0]))[0]), 6),
             "optimizer": _optimizer_facts(group["lr"], group["weight_decay"], group["eps"])}
    return Peer(train_step if mode == "train" else infer_step,
                sum(p.numel() for p in model.parameters() if p.requires_grad), facts)


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


def build_peers(names, config, batch, mode, precision, warmup, jit_compile) -> tuple:
    """-> ({name: Peer}, {name: bytes of RSS its building and warm-up added})."""
    peers, rss, memory = {}, {}, PeakRss()
    for name in names:
        print(f"building {name} ...", flush=True)
        memory.mark()
        peers[name] = RUNNERS[name](config, batch, mode, precision, jit_compile)
        for _ in range(warmup):
            peers[name].step()
        rss[name] = memory.since_mark()
    memory.stop = True
    return peers, rss


def run(size, seq_length, batch_size, mode, precision, peers, warmup, rounds, jit_compile) -> dict:
    """Builds, warms up and times the models; prints the table; returns the ratio
    (value, low, high) of ours to the best peer."""
    print("\n".join(timing.header("bert_tf.benchmark")), flush=True)
    config = config_for_size(size)
    batch = random_batch(config, batch_size, seq_length)
    flops = training_flops_per_example(config, seq_length, mode == "train") * batch_size
    peak = matmul_peak_gflops(precision)
    names = ["ours"] + [p for p in peers if p != "ours"]
    built, rss = build_peers(names, config, batch, mode, precision, warmup, jit_compile)
    seconds = timing.run_rounds({name: built[name].step for name in names}, rounds,
                                log=lambda line: print(line, flush=True))
    rates = {name: [batch_size / s for s in seconds[name]] for name in names}
    print(f"\n{size} seq={seq_length} batch={batch_size} mode={mode} precision={precision} "
          f"jit_compile={jit_compile} threads={os.cpu_count()} rounds={rounds} "
          f"matmul_peak={peak:.0f} GFLOP/s")
    print(f"{'model':<10} {'examples/s':>11} {'min':>8} {'max':>8} {'GFLOP/s':>8} "
          f"{'% peak':>7} {'params':>11} {'+RSS GiB':>9}")
    for name in names:
        median, low, high = timing.spread(rates[name])
        gflops = flops * median / batch_size / 1e9
        print(f"{name:<10} {median:>11.2f} {low:>8.2f} {high:>8.2f} {gflops:>8.1f} "
              f"{100 * gflops / peak:>6.0f}% {built[name].num_parameters:>11,} "
              f"{rss[name] / 2 ** 30:>9.2f}")
    others = [name for name in names if name != "ours"]
    if not others:
        return {}
    best = max(others, key=lambda name: timing.spread(rates[name])[0])
    ratio = timing.bootstrap_ratio(rates["ours"], *[rates[name] for name in others])
    print(f"ratio_vs_best_peer={ratio[0]:.2f} (95% CI {ratio[1]:.2f}-{ratio[2]:.2f}; "
          f"best peer by median: {best})")
    return {"ratio_vs_best_peer": ratio, "best_peer": best, "examples_per_second": rates}


def ab_of_ours(program: str, variants: dict, precision: str, rounds: int,
               steps: int = 1, config: BertConfig = BertConfig()) -> tuple:
    """An A/B of a change to our model: the train step of `ours` (BERT-Base unless
    `config`, batch 32 x 128) built and warmed up under each of `variants` ({name: a
    context manager factory that makes the model that variant; the first is the
    baseline}), then timed side by side in rotated rounds. Prints `program`'s header, each
    variant's median seconds per step with min-max, and the first variant's time over each
    other's with a 95% bootstrap interval; returns the last such (ratio, low, high), None
    for a single variant."""
    print("\n".join(timing.header(program)), flush=True)
    batch = random_batch(config, 32, 128)
    built = {}
    for name, variant in variants.items():
        with variant():  # traced inside: the variant's graph is the one timed
            built[name] = ours(config, batch, "train", precision, False)
            built[name].step()

    def runner(peer):
        def run():
            for _ in range(steps):
                peer.step()  # returns the loss as numpy: the step has finished
        return run

    seconds = timing.run_rounds({name: runner(peer) for name, peer in built.items()}, rounds,
                                log=lambda line: print(line, flush=True))
    width = max(map(len, built))
    for name, values in seconds.items():
        median, low, high = timing.spread([v / steps for v in values])
        print(f"{name:<{width}} {median:6.3f} s/step ({low:.3f}-{high:.3f})")
    baseline, *others = built
    ratio = None  # one variant: nothing to compare
    for name in others:
        ratio = timing.bootstrap_ratio(seconds[baseline], seconds[name])
        print(f"{precision}: {baseline} / {name} time = {ratio[0]:.3f} "
              f"(95% CI {ratio[1]:.3f}-{ratio[2]:.3f})")
    return ratio


def ab_of_ours_cli(doc: str, program: str, variants: dict) -> None:
    """An A/B script's command line (--precision, --rounds, --steps) -> `ab_of_ours`."""
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="mixed_bfloat16", choices=["float32", "mixed_bfloat16"])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=1, help="steps per round")
    args = p.parse_args()
    ab_of_ours(program, variants, args.precision, args.rounds, args.steps)


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
    parser.add_argument("--rounds", type=int, default=8)
    # Off by default: on the CPUs measured here XLA made every TensorFlow model slower
    # (BERT-Base bf16 step 8.6 s with XLA, 5.2 s without; results/benchmark/README.md).
    parser.add_argument("--jit_compile", type=lambda s: s.lower() in ("1", "true", "yes"),
                        default=False, help="XLA-compile the TensorFlow models' steps (all of them)")
    args = parser.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in RUNNERS]
    if unknown:
        parser.error(f"unknown peers {unknown}; choose from {sorted(set(RUNNERS) - {'ours'})}")
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (a spread and an interval need rounds)")
    run(args.size, args.seq_length, args.batch_size, args.mode, args.precision, peers,
        args.warmup, args.rounds, args.jit_compile)


if __name__ == "__main__":
    main()
