"""A/B of the fine-tuning train step's trace: `bert_tf.optimization.AdamW` as it is (the
step's scalars once per step, no merge_call per variable on one replica) against the same
fused AdamW with Keras's per-variable update and weight decay (what it was before), in one
process, rounds rotated.

Each round builds the shipped MiniLM's layout (L6/H384, random weights) + a 2-way head as
`glue_suite` does, compiles it with BERT's optimizer, and times tracing Keras's train step
for length-bucketed batches ([None, None] inputs); the model build is not timed.

    python results/benchmark/trace_ab.py --rounds 8

Prints the provenance header, per contender the graph's ops (all, and the optimizer's) and
its median trace seconds with min-max, and hoisted / per-variable time with a 95%
bootstrap interval over rounds.
"""

import argparse
import time
import types

import keras
import tensorflow as tf

from bert_tf import optimization, timing
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from glue_suite import task_models, tasks

MINILM = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                    intermediate_size=1536)


def per_variable(optimizer: optimization.AdamW) -> optimization.AdamW:
    """`optimizer` with Keras's per-variable update and weight decay (the fused AdamW as
    it was before)."""
    for name in ("_backend_update_step", "_apply_weight_decay"):
        setattr(optimizer, name,
                types.MethodType(getattr(keras.optimizers.AdamW, name), optimizer))
    return optimizer


def traced_train_step(variant) -> tuple[float, int, int]:
    """(trace seconds, ops, optimizer ops) of a fresh model's train step, with BERT's
    optimizer as `variant` makes it."""
    spec = tasks.get_task("cola")
    encoder = BertEncoder(MINILM, name="encoder")
    encoder.build()
    model = task_models.build_model(spec, encoder, None)
    optimizer = variant(optimization.create_optimizer(1e-4, 1000, 100, clipnorm=1.0))
    task_models.compile_model(model, spec.kind, optimizer)
    ids = tf.ones((32, 16), tf.int32)
    features = {"input_ids": ids, "input_mask": ids, "segment_ids": tf.zeros_like(ids)}
    model._symbolic_build(data_batch=(features, tf.zeros((32,), tf.int32)))
    signature = ({k: tf.TensorSpec((None, None), tf.int32) for k in features},
                 tf.TensorSpec((None,), tf.int32))
    step = tf.function(lambda x, y: model.train_step((x, y)))
    began = time.perf_counter()
    graph = step.get_concrete_function(*signature).graph
    seconds = time.perf_counter() - began
    ops = graph.get_operations()
    in_optimizer = [op for op in ops if optimizer.name.lower() in op.name.lower()]
    return seconds, len(ops), len(in_optimizer)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/trace_ab.py")), flush=True)
    contenders = {"hoisted": lambda optimizer: optimizer, "per-variable": per_variable}
    counts = {}

    def trace(name):
        seconds, *counts[name] = traced_train_step(contenders[name])
        return seconds

    seconds = timing.measured_rounds({name: lambda n=name: trace(n) for name in contenders},
                                     args.rounds, log=lambda line: print(line, flush=True))
    for name in contenders:
        median, low, high = timing.spread(seconds[name])
        ops, optimizer_ops = counts[name]
        print(f"{name:>12}: {ops} ops ({optimizer_ops} in the optimizer); trace "
              f"{median:.2f} s (min {low:.2f}, max {high:.2f})")
    ratio, low, high = timing.bootstrap_ratio(seconds["per-variable"], seconds["hoisted"])
    print(f"trace time per-variable / hoisted: {ratio:.2f}x [95% CI {low:.2f}, {high:.2f}]")


if __name__ == "__main__":
    main()
