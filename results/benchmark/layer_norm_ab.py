"""A/B of the LayerNorm's written-out gradient (issue 16): every LayerNorm of the model
as `bert_tf.layer_norm.LayerNorm` (now) against Keras's LayerNormalization (before,
commit 735cc08), differentiated op by op by TensorFlow, on BERT-Base's train step of
`bert_tf.benchmark` ("ours": encoder + classification head, AdamW, dropout 0.1, batch
32 x 128), in one process, rounds rotated. `layer_norm_pretrain_ab.py` does the same on
BERT-Tiny's pretraining step.

    python results/benchmark/layer_norm_ab.py --precision mixed_bfloat16 --rounds 8

Prints the provenance header, each contender's median seconds per step with min-max, and
keras / written time with a 95% bootstrap interval over rounds.
"""

import contextlib
from unittest import mock

import keras

from bert_tf import benchmark, embeddings, heads, transformer_block

# The modules that build a LayerNorm: the embeddings, every block, the masked LM head.
BUILDERS = (embeddings, heads, transformer_block)


def keras_patches() -> dict:
    """{(module, "LayerNorm"): Keras's class}: models built under them use Keras's."""
    return {(module, "LayerNorm"): keras.layers.LayerNormalization for module in BUILDERS}


@contextlib.contextmanager
def keras_layer_norm():
    with contextlib.ExitStack() as stack:
        for (module, name), value in keras_patches().items():
            stack.enter_context(mock.patch.object(module, name, value))
        yield


if __name__ == "__main__":
    benchmark.ab_of_ours_cli(__doc__, "results/benchmark/layer_norm_ab.py",
                             {"keras": keras_layer_norm, "written": contextlib.nullcontext})
