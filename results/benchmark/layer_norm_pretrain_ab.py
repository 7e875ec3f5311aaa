"""`layer_norm_ab.py` on BERT-Tiny's pretraining step, the step the cpu plan spends its
budget on: `bert_tf.pretrain_benchmark`'s step_alone (MLM + NSP, AdamW, clipping, batch
64 x 128, 20 predictions, one batch of the records held in memory) with every LayerNorm
written out (now) and as Keras's (before), in one process, rounds rotated
(`mlm_xent_ab.compare`).

    python results/benchmark/layer_norm_pretrain_ab.py --train_files 'RECORDS/part-*' \\
        --vocab_file VOCAB --precision mixed_bfloat16 --rounds 8

Prints the provenance header, each contender's median examples/s with its min-max, and
written / keras examples/s with a 95% bootstrap interval over rounds.
"""

from layer_norm_ab import keras_patches  # beside this script
from mlm_xent_ab import compare

if __name__ == "__main__":
    compare("results/benchmark/layer_norm_pretrain_ab.py", __doc__,
            {"written": {}, "keras": keras_patches()})
