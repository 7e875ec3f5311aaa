"""A fine-tuned task model as a SavedModel that takes raw strings
(`python -m glue_suite.run --export_dir DIR` writes the best model of the grid).

Tokenizing and packing run in the graph, as in `bert_tf.export` (whose
`write_string_model` writes it), so serving needs neither this code nor a vocabulary
file, only `import tensorflow_text` (its ops) before
`tf.saved_model.load(DIR).signatures["serving_default"](**strings)`.
Signature "serving_default" by task kind (B examples, T = max_seq_length, L labels):

  classification   text_a [B], and text_b [B] for pair tasks (TaskSpec.columns)
                   -> probabilities [B, L] float32 (softmax, in TaskSpec.labels order),
                      label [B] string (the most probable)
  regression       text_a, text_b [B]  -> score [B] float32 (STS-B)
  multiple_choice  context [B], endings [B, 4] ("start_ending ending_k" each, as in
                   `features.swag_features`) -> probabilities [B, 4], label [B] int32
  span (SQuAD)     question [B], context [B] -> one row per window, W windows in all:
                   start_logits, end_logits [W, T] float32, example_index [W] int32,
                   input_ids, token_to_orig [W, T] int32, token_is_max_context [W, T] bool
  token (NER)      not exported (`check_exportable`): the run tags every sentence inside
                   its document's context (`features.ner_features`), which a
                   one-sentence signature cannot reproduce.

SQuAD's windows are made in the graph exactly as `features.squad_features` makes them
(the original's sliding windows over the context's whitespace words, the question cut
to max_query_length, the max-context rule). The answer text is not: the original
post-processing (n-best spans over all windows of a question, text recovered from the
context's words, SQuAD v2.0 null odds) is Python, `glue_suite.squad_postprocess`, run
outside the graph on these outputs; `glue_suite.predict` does it.

assets.extra/ beside saved_model.pb holds task.json (the task and feature settings
that `glue_suite.predict` reads) and vocab.txt (for SQuAD's text recovery).
"""

import dataclasses
import json
import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.export import text_spec, write_string_model
from bert_tf.files import write_json
from bert_tf.tokenization import BertPreprocessor, BertTokenizer, pack_inputs
from glue_suite.features import FeatureSettings
from glue_suite.task_models import NUM_CHOICES
from glue_suite.squad_readers import _SQUAD_WHITESPACE
from glue_suite.tasks import (CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION, SPAN, TOKEN,
                              TaskSpec, get_task)

EXTRA = "assets.extra"  # TF Serving's place for files beside the model
TASK_FILE = "task.json"
# The SQuAD readers' whitespace (`squad_readers.split_context`) as an RE2 class.
_SQUAD_SPLIT = "[" + "".join(f"\\x{{{ord(c):X}}}" for c in _SQUAD_WHITESPACE) + "]+"


def check_exportable(spec: TaskSpec) -> None:
    """Raises ValueError for a task whose model cannot be exported (see above)."""
    if spec.kind == TOKEN:
        raise ValueError(f"--export_dir: {spec.name} models are not exported; they tag each "
                         f"sentence in its document's context, which a string signature "
                         f"cannot reproduce (see glue_suite/export.py)")


def _float32(x):
    return tf.cast(x, tf.float32)  # mixed_bfloat16 models compute in bfloat16


def _classification(model, spec, preprocessor, settings, tokenizer):
    labels = tf.constant(spec.labels)

    def outputs(inputs):
        logits = _float32(model(inputs, training=False))  # [B, L]
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "label": tf.gather(labels, tf.argmax(logits, axis=-1))}

    if spec.columns.text_b is None:
        return lambda text_a: outputs(preprocessor(text_a)), [text_spec("text_a")]
    return (lambda text_a, text_b: outputs(preprocessor(text_a, text_b)),
            [text_spec("text_a"), text_spec("text_b")])


def _regression(model, spec, preprocessor, settings, tokenizer):
    def score(text_a, text_b):
        return {"score": _float32(model(preprocessor(text_a, text_b), training=False))}

    return score, [text_spec("text_a"), text_spec("text_b")]


def _multiple_choice(model, spec, preprocessor, settings, tokenizer):
    def choose(context, endings):
        packed = preprocessor(tf.repeat(context, NUM_CHOICES), tf.reshape(endings, [-1]))
        inputs = {k: tf.reshape(v, [-1, NUM_CHOICES, settings.max_seq_length])
                  for k, v in packed.items()}  # [B, C, T]
        logits = _float32(model(inputs, training=False))  # [B, C]
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "label": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    return choose, [text_spec("context"),
                    tf.TensorSpec([None, NUM_CHOICES], tf.string, name="endings")]


def _span(model, spec, preprocessor, settings, tokenizer):
    def answer_logits(question, context):
        windows = squad_windows(tokenizer, question, context, settings)
        logits = model({k: windows[k] for k in ("input_ids", "input_mask", "segment_ids")},
                       training=False)
        return {"start_logits": _float32(logits["start_logits"]),
                "end_logits": _float32(logits["end_logits"]),
                **{k: windows[k] for k in ("example_index", "input_ids", "token_to_orig",
                                           "token_is_max_context")}}

    return answer_logits, [text_spec("question"), text_spec("context")]


# kind -> (model, spec, preprocessor, settings, tokenizer) -> (function, input signature).
_ENDPOINTS = {CLASSIFICATION: _classification, REGRESSION: _regression,
              MULTIPLE_CHOICE: _multiple_choice, SPAN: _span}


def export_task_model(model: keras.Model, task: str, tokenizer: BertTokenizer,
                      settings: FeatureSettings, output_dir: str) -> None:
    """Writes the SavedModel described above, and assets.extra/.

    Args:
        model: the fine-tuned model (`task_models.build_model` of the task's kind).
        task: its task (the evaluated one, e.g. squad2.0 for a --train_task squad1.1 run).
        tokenizer: the checkpoint's tokenizer, as used for the features.
        settings: max_seq_length (and SQuAD's doc_stride, max_query_length).
    """
    spec = get_task(task)
    check_exportable(spec)
    preprocessor = BertPreprocessor(tokenizer, settings.max_seq_length)
    endpoint = _ENDPOINTS[spec.kind](model, spec, preprocessor, settings, tokenizer)
    write_string_model(output_dir, [model, preprocessor], {"serving_default": endpoint})
    os.makedirs(os.path.join(output_dir, EXTRA), exist_ok=True)
    write_json(os.path.join(output_dir, EXTRA, TASK_FILE),
               {"task": spec.name, "features": dataclasses.asdict(settings),
                "lower_case": tokenizer.lower_case})
    with open(os.path.join(output_dir, EXTRA, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tokenizer.vocab) + "\n")


def read_task_file(model_dir: str) -> tuple[str, FeatureSettings, bool, str]:
    """(task, feature settings, lower_case, vocab file) of an exported model."""
    path = os.path.join(model_dir, EXTRA, TASK_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{model_dir}: no {EXTRA}/{TASK_FILE}; not a model written "
                                f"by python -m glue_suite.run --export_dir")
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    return (values["task"], FeatureSettings(**values["features"]), values["lower_case"],
            os.path.join(model_dir, EXTRA, "vocab.txt"))


# ---------------------------------------------------------------------------------------
# SQuAD's sliding windows, in the graph
# ---------------------------------------------------------------------------------------

def squad_windows(tokenizer: BertTokenizer, question, context,
                  settings: FeatureSettings) -> dict:
    """Questions and contexts [B] -> `features.squad_features`'s arrays for inference:
    input_ids, input_mask, segment_ids, token_to_orig, token_is_max_context [W, T] and
    example_index [W], W = the windows of all B examples, in example order."""
    T = settings.max_seq_length
    query = tokenizer.tokenize(question)[:, :settings.max_query_length]  # [B, (Q)]
    words = tf_text.regex_split(context, _SQUAD_SPLIT)                    # [B, (words)]
    pieces = tokenizer.tokenize_pretokenized(words)                       # [B, (words), (P)]
    doc = pieces.merge_dims(1, 2)                                         # [B, (N)]
    # Each piece's word, counted within its example (the original's tok_to_orig_index).
    word_ids = tf.range(pieces.values.nrows()) - tf.gather(pieces.row_starts(),
                                                           pieces.value_rowids())
    piece_word = tf.cast(tf.gather(word_ids, pieces.values.value_rowids()), tf.int32)

    # doc_spans: windows of `room` tokens, `step` apart, the last ending at the end.
    n, query_length = doc.row_lengths(), query.row_lengths()              # [B]
    room = T - query_length - 3  # [CLS], [SEP], [SEP]
    tf.debugging.assert_positive(room, message=f"max_seq_length={T} leaves no room for the "
                                               f"context after the question")
    step = tf.minimum(room, settings.doc_stride)
    num_windows = tf.where(n > 0, 1 + (tf.maximum(n - room, 0) + step - 1) // step, 0)
    example = tf.repeat(tf.range(tf.shape(n, out_type=tf.int64)[0]), num_windows)  # [W]
    start = tf.ragged.range(num_windows).flat_values * tf.gather(step, example)
    length = tf.minimum(tf.gather(n, example) - start, tf.gather(room, example))
    first = tf.gather(doc.row_starts(), example) + start
    positions = tf.ragged.range(first, first + length)  # [W, (length)] into doc's pieces

    packed = pack_inputs([tf.gather(query, example), tf.gather(doc.flat_values, positions)],
                         T, tokenizer.cls_id, tokenizer.sep_id)
    offset = tf.gather(query_length, example) + 2  # window token j sits at offset + j
    return {**packed, "example_index": tf.cast(example, tf.int32),
            "token_to_orig": _place(tf.gather(piece_word, positions), offset, T, -1),
            "token_is_max_context": _place(_is_max_context(positions, length, doc),
                                           offset, T, False)}


def _is_max_context(positions: tf.RaggedTensor, length, doc: tf.RaggedTensor):
    """`features.max_context_span` per window token [W, (length)] bool: is this window
    the one where the token has the most context (min(left, right) + 0.01 * length,
    in float64 as numpy computes it; the first window wins a tie)?"""
    j = tf.ragged.range(length).flat_values                       # position in window
    window_length = tf.gather(length, positions.value_rowids())
    score = (tf.cast(tf.minimum(j, window_length - 1 - j), tf.float64)
             + 0.01 * tf.cast(window_length, tf.float64))
    token, num_tokens = positions.flat_values, tf.shape(doc.flat_values, out_type=tf.int64)[0]
    best = tf.math.unsorted_segment_max(score, token, num_tokens)
    window = positions.value_rowids()
    candidate = tf.where(score == tf.gather(best, token), window, tf.int64.max)
    winner = tf.math.unsorted_segment_min(candidate, token, num_tokens)
    return positions.with_flat_values(window == tf.gather(winner, token))


def _place(values: tf.RaggedTensor, offset, T: int, fill):
    """Ragged rows [W, (n)] written at columns offset[w] ... of a [W, T] tensor of `fill`."""
    rows = values.value_rowids()
    columns = tf.gather(offset, rows) + tf.ragged.range(values.row_lengths()).flat_values
    dense = tf.fill(tf.stack([values.nrows(), T]), tf.constant(fill, values.dtype))
    return tf.tensor_scatter_nd_update(dense, tf.stack([rows, columns], axis=1),
                                       values.flat_values)
