"""The exported SavedModel takes raw strings and reproduces the Keras encoder."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import load_encoder
from bert_tf.export import export_saved_model
from bert_tf.tokenization import BertPreprocessor, BertTokenizer


@pytest.mark.slow
def test_saved_model_serves_raw_strings(tmp_path, minilm_dir):
    encoder, checkpoint = load_encoder(minilm_dir)
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=checkpoint.lower_case)
    export_saved_model(encoder, tokenizer, str(tmp_path / "saved"), max_seq_length=32)
    del encoder
    loaded = tf.saved_model.load(str(tmp_path / "saved"))

    texts = tf.constant(["Hello world!", "The quick brown fox jumps over the lazy dog."])
    served = loaded.signatures["serving_default"](text=texts)
    encoder, _ = load_encoder(minilm_dir)
    expected = encoder(BertPreprocessor(tokenizer, 32)(texts))
    # The SavedModel graph and the eager model sum in different orders (oneDNN picks
    # per path): float32 reassociation over 6 layers, on LayerNorm-scaled values of O(1).
    np.testing.assert_allclose(served["pooled_output"], expected["pooled_output"],
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(served["sequence_output"], expected["sequence_output"],
                               rtol=1e-4, atol=1e-4)
    assert served["encoder_outputs"].shape == (7, 2, 32, 384)

    pair = loaded.signatures["pair"](text_a=tf.constant(["A question?"]),
                                     text_b=tf.constant(["An answer."]))
    mask = pair["input_mask"].numpy()[0]
    assert mask.sum() == 9  # [CLS] a question ? [SEP] an answer . [SEP]
