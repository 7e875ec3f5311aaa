"""Masked-LM masking in the input pipeline ("dynamic masking"), with tensorflow-text.

Static masks (`create_pretraining_data`) fix each instance's masks when the data is
written, so a model sees the same masks every epoch (the original repeats the data
`dupe_factor` times with different masks to soften this). Masking each batch as it is
read gives new masks every time it is seen. Write unmasked records with
`create_pretraining_data --dynamic_masking` (any records work: their masked_lm_*
features are replaced), then

    masking = DynamicMasking(vocab_size=tokenizer.vocab_size, mask_id=tokenizer.mask_id,
                             special_ids=[tokenizer.cls_id, tokenizer.sep_id,
                                          tokenizer.pad_id])
    dataset = pretraining_dataset.make_pretraining_dataset(..., seed=seed,
                                                           batch_transform=masking)

The outputs are the static records' features: `input_ids` with the replacements,
`masked_lm_positions` / `masked_lm_ids` / `masked_lm_weights` [B, P] (ascending
positions, zero-padded), the rest passed through.

Same as the static masks: tokens other than `special_ids` are selected, each selected
one becomes [MASK], stays, or becomes a uniformly random id from the whole vocabulary
at `mask_rates`. Different: tf-text's `RandomItemSelector` selects
`min(P, ceil(num_selectable * masked_lm_prob))` tokens, where the original selects
`min(P, max(1, round(len(tokens) * masked_lm_prob)))` counting [CLS] and [SEP]
(19 either way for a full 128-token pair; tf-text computes in float32, so 100
selectable tokens give ceil(15.000001) = 16); and no whole-word masking. The random
draws are stateless, from a seed per batch (see `DynamicMasking`).
"""

import tensorflow as tf
import tensorflow_text as tf_text


class _SeededMaskValuesChooser(tf_text.MaskValuesChooser):
    """tf-text's MaskValuesChooser with stateless random draws from a given seed."""

    def __init__(self, vocab_size, mask_token, mask_token_rate, random_token_rate, seed):
        super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
        self._seeds = tf.random.experimental.stateless_split(seed, 2)  # [2, 2]

    def get_mask_values(self, masked_lm_ids):
        ids = masked_lm_ids.flat_values  # [N], the selected ids of the whole batch
        draw = tf.random.stateless_uniform(tf.shape(ids), self._seeds[0])
        random_ids = tf.random.stateless_uniform(tf.shape(ids), self._seeds[1], minval=0,
                                                 maxval=self.vocab_size, dtype=ids.dtype)
        mask_rate = self._mask_token_rate
        values = tf.where(draw < mask_rate, tf.cast(self.mask_token, ids.dtype),
                          tf.where(draw < mask_rate + self.random_token_rate, random_ids, ids))
        return masked_lm_ids.with_flat_values(values)


def _seeded_shuffle(seed):
    """A `RandomItemSelector` shuffle_fn: a stateless permutation of one sequence's
    selectable positions, different for each sequence of the batch."""
    def shuffle(positions):  # [n] indices into the batch's flat tokens
        first = tf.cast(tf.reduce_sum(positions[:1]), tf.int64)  # unique in the batch
        keys = tf.random.stateless_uniform(
            tf.shape(positions), tf.random.experimental.stateless_fold_in(seed, first))
        return tf.gather(positions, tf.argsort(keys))
    return shuffle


class DynamicMasking(tf.Module):
    """Masks a batch of packed records in-graph: map it over a batched dataset.

    Called as `masking(features, seed)` with a [2] integer seed per batch (what
    `make_pretraining_dataset` passes, from `tf.data.Dataset.random`): the masks are a
    function of the batch and the seed, so a seeded pipeline is reproducible and a
    restored iterator checkpoint continues with the same masks.

    Args:
        vocab_size: random replacements are drawn from [0, vocab_size).
        mask_id: id of [MASK].
        special_ids: ids never selected ([CLS], [SEP], [PAD]).
        max_predictions_per_seq: P, the most predictions per sequence (the padded width).
        masked_lm_prob: fraction of the selectable tokens to select.
        mask_rates: fractions of the selected tokens replaced by [MASK], kept, replaced
            by a random id (sum 1).
    """

    def __init__(self, vocab_size: int, mask_id: int, special_ids: list[int],
                 max_predictions_per_seq: int = 20, masked_lm_prob: float = 0.15,
                 mask_rates: tuple[float, float, float] = (0.8, 0.1, 0.1)):
        super().__init__()
        if len(mask_rates) != 3 or min(mask_rates) < 0 or abs(sum(mask_rates) - 1) > 1e-6:
            raise ValueError(f"mask_rates must be three non-negative fractions ([MASK], "
                             f"same, random) that sum to 1, got {mask_rates}")
        if not 0 < masked_lm_prob <= 1:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}")
        self.vocab_size = vocab_size
        self.mask_id = mask_id
        self.special_ids = list(special_ids)
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.mask_rates = tuple(mask_rates)

    def __call__(self, features: dict, seed: tf.Tensor) -> dict:
        """{"input_ids", "input_mask", ...} [B, T] and a seed [2] -> the same with masks
        applied, plus masked_lm_positions/ids/weights [B, P]."""
        selector = tf_text.RandomItemSelector(
            max_selections_per_batch=self.max_predictions_per_seq,  # per sequence, in fact
            selection_rate=self.masked_lm_prob, unselectable_ids=self.special_ids,
            shuffle_fn=_seeded_shuffle(tf.cast(seed, tf.int64)))
        chooser = _SeededMaskValuesChooser(
            self.vocab_size, self.mask_id, self.mask_rates[0], self.mask_rates[2],
            seed=tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), -1))

        input_ids = features["input_ids"]  # [B, T]
        lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int64), axis=1)  # [B]
        tokens = tf.RaggedTensor.from_tensor(input_ids, lengths=lengths)  # [B, (n)]
        masked, positions, labels = tf_text.mask_language_model(
            tokens, selector, chooser)  # [B, (n)], [B, (k)], [B, (k)]

        num_predictions = [None, self.max_predictions_per_seq]
        outputs = dict(features)
        outputs["input_ids"] = masked.to_tensor(default_value=0, shape=input_ids.shape)
        outputs["masked_lm_positions"] = tf.cast(positions, input_ids.dtype).to_tensor(
            default_value=0, shape=num_predictions)
        outputs["masked_lm_ids"] = tf.cast(labels, input_ids.dtype).to_tensor(
            default_value=0, shape=num_predictions)
        outputs["masked_lm_weights"] = tf.ones_like(labels, tf.float32).to_tensor(
            default_value=0.0, shape=num_predictions)
        return outputs
