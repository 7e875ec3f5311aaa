"""Whether a pretrained checkpoint's network still tells its tokens apart: the entropy of
each layer's attention, the similarity of the last layer's token vectors, and how many
different tokens it predicts.

A run whose masked-LM loss sits at the unigram entropy may be slow (still learning) or
collapsed (its output no longer depends on its input). This tells them apart. Each
checkpoint is converted to Hugging Face's layout and run by transformers'
BertForPreTraining (as in `masked_lm_by_kind.py`), on the first --batches batches of 64
held-out records:

    python results/pretraining/attention_collapse.py \\
        --records 'runs/cpu.data.heldout-nsp/part-*' \\
        runs/cpu.pretrain.tiny-nsp/export runs/cpu.pretrain.tiny-nsp-mask100-0-0/export

Per checkpoint:
  attention entropy  per layer, in nats, averaged over heads and real query tokens; a query
                     attending uniformly over n tokens scores ln(n), one attending to a
                     single token 0 (attention entropy collapse)
  token cosine       mean cosine similarity of two different real tokens' last-layer
                     vectors in a sequence; 1.000: every position carries the same vector
  distinct targets   different tokens predicted at the masked positions
  NSP "random"       share of sequences whose next sentence is predicted random
"""

import numpy as np
import torch
from masked_lm_by_kind import batches, checkpoints_parser, huggingface_copies
from transformers import BertForPreTraining

from bert_tf import timing


def attention_entropy(attentions: tuple, mask: torch.Tensor) -> list:
    """Per layer, the mean entropy of the attention of real query tokens (nats)."""
    entropies = []
    for probabilities in attentions:  # [B, heads, T, T]
        entropy = -(probabilities * probabilities.clamp_min(1e-12).log()).sum(-1)  # [B, H, T]
        real = mask[:, None, :].expand_as(entropy)
        entropies.append(float(entropy[real].mean()))
    return entropies


def token_cosine(hidden: torch.Tensor, mask: torch.Tensor) -> list:
    """Per sequence, the mean cosine similarity of two different real tokens' vectors."""
    similarities = []
    for vectors, real in zip(hidden, mask):
        unit = torch.nn.functional.normalize(vectors[real], dim=-1)
        n = len(unit)
        similarities.append(float(((unit @ unit.T).sum() - n) / (n * n - n)))
    return similarities


def describe(model, held_out) -> dict:
    layers, cosines, predicted, nsp_random, lengths = [], [], set(), [], []
    for b in held_out:
        mask = b["input_mask"].bool()
        with torch.no_grad():
            out = model(input_ids=b["input_ids"], attention_mask=b["input_mask"],
                        token_type_ids=b["segment_ids"], output_hidden_states=True,
                        output_attentions=True)
        layers.append(attention_entropy(out.attentions, mask))
        cosines += token_cosine(out.hidden_states[-1], mask)
        targets = torch.gather(out.prediction_logits.argmax(-1), 1, b["masked_lm_positions"])
        predicted.update(targets[b["masked_lm_weights"] > 0].tolist())
        nsp_random.append(float(out.seq_relationship_logits.argmax(-1).float().mean()))
        lengths += mask.sum(1).tolist()
    return {"attention_entropy": np.mean(layers, axis=0), "token_cosine": np.mean(cosines),
            "distinct_targets": len(predicted), "nsp_random": np.mean(nsp_random),
            "uniform_entropy": float(np.mean(np.log(lengths)))}


def main() -> None:
    args = checkpoints_parser(__doc__.split("\n\n")[0], batches=4).parse_args()
    print("\n".join(timing.header("results/pretraining/attention_collapse.py")))
    torch.set_num_threads(1)
    for checkpoint, hf_dir in huggingface_copies(args.checkpoints):
        # "eager": the attention implementation that returns its probabilities.
        model = BertForPreTraining.from_pretrained(hf_dir, attn_implementation="eager")
        d = describe(model.eval(), batches(args.records, args.max_seq_length,
                                           args.max_predictions_per_seq, args.batches))
        print(f"\n{checkpoint}\n  attention entropy  " +
              ", ".join(f"layer {i + 1} {e:.2f}" for i, e in enumerate(d["attention_entropy"])) +
              f" (uniform: {d['uniform_entropy']:.2f})\n"
              f"  token cosine       {d['token_cosine']:.3f}\n"
              f"  distinct targets   {d['distinct_targets']}\n"
              f"  NSP \"random\"       {d['nsp_random']:.2f}")


if __name__ == "__main__":
    main()
