"""A/B of the masked LM head over the weighted prediction slots alone (now, wherever
shapes may change) against every slot (before, commit 5dbd602; still the path under XLA
and on TPUs), on BERT-Tiny's compiled pretraining step, in one process, rounds rotated.

  weighted   `BertPretrainer.loss_sums(..., only_weighted=True)`, as the trainer runs it
  all_slots  the same step with every [B, P] slot computed (`PredictionSlots` patched to
             only_weighted=False)

Both: `bert_tf.pretrain_benchmark`'s step_alone (`Trainer`'s step: MLM + NSP, AdamW,
clipping, on one batch of the records held in memory), batch 64 x 128, 20 predictions,
float32; `mlm_xent_ab.compare` runs them.

    python results/benchmark/prediction_slots_ab.py --train_files 'RECORDS/part-*' \\
        --vocab_file VOCAB --rounds 8
"""

from mlm_xent_ab import compare

from bert_tf.pretraining_model import PredictionSlots


def all_slots_variant() -> dict:
    """Patches: `PredictionSlots` keeps every slot, whatever the trainer asks."""
    slots_init = PredictionSlots.__init__

    def init(self, weights, only_weighted):
        slots_init(self, weights, only_weighted=False)

    return {(PredictionSlots, "__init__"): init}


if __name__ == "__main__":
    compare("results/benchmark/prediction_slots_ab.py", __doc__,
            {"weighted": {}, "all_slots": all_slots_variant()})
