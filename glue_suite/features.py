"""Examples -> model features for every task kind, tokenized in batches and cached on disk.

Features are a dict of numpy arrays, so they cache as one `.npz` file and feed
`tf.data.Dataset.from_tensor_slices` directly. T = max_seq_length, N = examples,
F = features (SQuAD windows, NER sentence windows), C = 4 SWAG choices:

  classification, regression (GLUE)
      input_ids, input_mask, segment_ids   int32 [N, T]    [CLS] A [SEP] (B [SEP])
      labels                               int32 / float32 [N]      (labelled splits)
  multiple_choice (SWAG)
      input_ids, input_mask, segment_ids   int32 [N, C, T] [CLS] context [SEP] start ending [SEP]
      labels                               int32 [N]
  span (SQuAD)
      input_ids, input_mask, segment_ids   int32 [F, T]    [CLS] question [SEP] context window [SEP]
      example_index                        int32 [F]       window -> example
      token_to_orig                        int32 [F, T]    context token -> whitespace word, else -1
      token_is_max_context                 bool  [F, T]    this window gives the token most context
      start_positions, end_positions       int32 [F]       (train) answer tokens, 0 = not in window
  token (CoNLL-2003)
      input_ids, input_mask, segment_ids   int32 [F, T]    [CLS] document context [SEP]
      labels, label_weights                int32, float32 [F, T]  tag of each word's first piece
      sentence_index                       int32 [F]       window -> sentence
      word_index                           int32 [F, T]    first piece -> word in sentence, else -1
      sentence_mask                        int32 [F, T]    1 on the sentence's own pieces (not
                                                           its context): what a feature-based
                                                           tagger reads (glue_suite.frozen_features)

Tokenization runs through tf-text on whole batches; only the SQuAD window loop is Python.
`load_or_convert` keys the cache on everything that changes the features: task, split,
a hash of the examples' content (it changes when a reader or a data file changes, or
with --max_train_examples), the vocabulary's hash, lower-casing, T, the SQuAD stride and
query length, and `FEATURES_VERSION`.
"""

import dataclasses
import hashlib
import json
import logging
import os
import time
import zipfile
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf.files import atomic_open
from bert_tf.tokenization import BertPreprocessor, BertTokenizer
from glue_suite import readers
from glue_suite.squad_readers import SquadExample
from glue_suite.tasks import (CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION, SPAN, TOKEN,
                              Hyperparams, get_task)

logger = logging.getLogger(__name__)

# Bump when the features computed from the same examples change (2: NER sentence_mask).
FEATURES_VERSION = 2

# Strings per tf-text call: large enough to amortise op dispatch, small enough to keep
# the ragged intermediates in a few hundred MB.
_CHUNK = 4096


@dataclasses.dataclass(frozen=True)
class FeatureSettings:
    """What shapes the features besides the examples and the vocabulary.

    Args:
        max_seq_length: T, WordPiece tokens per sequence including [CLS]/[SEP].
        doc_stride: SQuAD: tokens the context window moves between windows.
        max_query_length: SQuAD: questions are cut to this many tokens.
    """
    max_seq_length: int = 128
    doc_stride: int = 128
    max_query_length: int = 64

    @classmethod
    def for_task(cls, hparams: Hyperparams, max_seq_length: Optional[int] = None,
                 doc_stride: Optional[int] = None,
                 max_query_length: Optional[int] = None) -> "FeatureSettings":
        """The given values, else the task's defaults (`hparams`), else the class's."""
        return cls(
            max_seq_length=max_seq_length or hparams.max_seq_length,
            doc_stride=doc_stride or hparams.doc_stride or cls.doc_stride,
            max_query_length=max_query_length or hparams.max_query_length
            or cls.max_query_length)


# ---------------------------------------------------------------------------------------
# Batched tokenization helpers
# ---------------------------------------------------------------------------------------

def _rows(ragged: tf.RaggedTensor) -> list[np.ndarray]:
    """A ragged [B, (N)] tensor -> B numpy int arrays."""
    flat, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
    return np.split(flat, splits[1:-1])


def tokenize_texts(tokenizer: BertTokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Strings -> one int32 WordPiece id array per string, in chunks of `_CHUNK`."""
    out = []
    for i in range(0, len(texts), _CHUNK):
        out += _rows(tokenizer.tokenize(tf.constant(list(texts[i:i + _CHUNK]), tf.string)))
    return out


def tokenize_words(tokenizer: BertTokenizer, sentences: Sequence[Sequence[str]]):
    """Pre-split sentences -> (piece ids, pieces per word) per sentence.

    Each word is tokenized on its own, as the original does for SQuAD whitespace tokens
    and CoNLL words, so every piece belongs to exactly one word. A word can have zero
    pieces (only control characters).
    """
    ids, counts = [], []
    for i in range(0, len(sentences), _CHUNK // 8):
        chunk = sentences[i:i + _CHUNK // 8]
        words = tf.RaggedTensor.from_row_lengths(
            tf.constant([w for s in chunk for w in s], tf.string),
            [len(s) for s in chunk])
        pieces = tokenizer.tokenize_pretokenized(words)  # [S, (words), (pieces)]
        flat = pieces.flat_values.numpy()
        word_splits = pieces.values.row_splits.numpy()   # word -> its pieces
        sentence_splits = pieces.row_splits.numpy()      # sentence -> its words
        for s in range(len(chunk)):
            w0, w1 = sentence_splits[s], sentence_splits[s + 1]
            ids.append(flat[word_splits[w0]:word_splits[w1]])
            counts.append(np.diff(word_splits[w0:w1 + 1]))
    return ids, counts


def _pack(tokenizer: BertTokenizer, max_seq_length: int, text_a, text_b=None) -> dict:
    """`BertPreprocessor` over chunks of strings -> numpy {"input_ids", ...} [N, T]."""
    preprocessor = BertPreprocessor(tokenizer, max_seq_length)
    parts = []
    for i in range(0, len(text_a), _CHUNK):
        b = None if text_b is None else tf.constant(list(text_b[i:i + _CHUNK]), tf.string)
        packed = preprocessor(tf.constant(list(text_a[i:i + _CHUNK]), tf.string), b)
        parts.append({k: v.numpy() for k, v in packed.items()})
    if not parts:
        return {k: np.zeros((0, max_seq_length), np.int32)
                for k in ("input_ids", "input_mask", "segment_ids")}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _empty_rows(num_rows: int, max_seq_length: int) -> dict:
    return {k: np.zeros((num_rows, max_seq_length), np.int32)
            for k in ("input_ids", "input_mask", "segment_ids")}


# ---------------------------------------------------------------------------------------
# GLUE and SWAG
# ---------------------------------------------------------------------------------------

def sentence_features(task: str, examples: Sequence[readers.InputExample],
                      tokenizer: BertTokenizer, settings: FeatureSettings,
                      labelled: bool) -> dict:
    """Single sentences `[CLS] A [SEP]` and pairs `[CLS] A [SEP] B [SEP]` (the original's
    packing and pair truncation, `bert_tf.tokenization.pack_inputs`)."""
    pair = bool(examples) and examples[0].text_b is not None
    features = _pack(tokenizer, settings.max_seq_length, [e.text_a for e in examples],
                     [e.text_b for e in examples] if pair else None)
    if labelled:
        dtype = np.float32 if get_task(task).kind == REGRESSION else np.int32
        features["labels"] = readers.example_labels(task, examples).astype(dtype)
    return features


def swag_features(task: str, examples: Sequence[readers.SwagExample],
                  tokenizer: BertTokenizer, settings: FeatureSettings,
                  labelled: bool) -> dict:
    """Four sequences per question, `[CLS] context [SEP] start_ending ending_k [SEP]`
    (the paper's SWAG setup); the model scores each [CLS] and softmaxes over the four.

    The ending is tokenized as "start_ending ending_k": WordPiece never crosses
    whitespace, so this equals concatenating the two token lists.
    """
    num_choices = 4
    contexts = [e.context for e in examples for _ in range(num_choices)]
    endings = [f"{e.start_ending} {ending}" for e in examples for ending in e.endings]
    packed = _pack(tokenizer, settings.max_seq_length, contexts, endings)
    features = {k: v.reshape(len(examples), num_choices, settings.max_seq_length)
                for k, v in packed.items()}  # [N, C, T]
    if labelled:
        features["labels"] = np.array([e.label for e in examples], np.int32)
    return features


# ---------------------------------------------------------------------------------------
# SQuAD: sliding windows with the original answer-span alignment
# ---------------------------------------------------------------------------------------

def improve_answer_span(doc_ids: np.ndarray, start: int, end: int,
                        answer_ids: np.ndarray) -> tuple[int, int]:
    """The original `_improve_answer_span`: the smallest sub-span of [start, end] whose
    pieces equal the tokenized answer.

    The whitespace word "(1895-1943)." gives the pieces ( 1895 - 1943 ) . ; for the
    answer "1895" the word-level span covers all six, this finds the one piece. (The
    original compares the joined token strings; ids are the same comparison.)
    """
    answer = list(answer_ids)
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if list(doc_ids[new_start:new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int):
    """The original sliding windows over the context: (start, length) pairs, each
    window `doc_stride` tokens after the previous one, the last one ending at the end."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_span(spans, num_tokens: int) -> np.ndarray:
    """For every context token, the window where it has the most context ([n] int).

    The original `_check_is_max_context`: score = min(left, right context) + 0.01 *
    window length; the first window wins a tie.
    """
    positions = np.arange(num_tokens)
    scores = np.full((len(spans), num_tokens), -np.inf)
    for s, (start, length) in enumerate(spans):
        end = start + length - 1
        inside = (positions >= start) & (positions <= end)
        score = np.minimum(positions - start, end - positions) + 0.01 * length
        scores[s, inside] = score[inside]
    return np.argmax(scores, axis=0)


def squad_features(task: str, examples: Sequence[SquadExample],
                   tokenizer: BertTokenizer, settings: FeatureSettings,
                   training: bool) -> dict:
    """google-research/bert's `convert_examples_to_features` for SQuAD.

    Every example gives one window per `doc_spans`: `[CLS] question [SEP] context
    window [SEP]`, segment 0 then 1. In training, a window that does not contain the
    whole answer, and every window of an unanswerable question, points at [CLS]
    (start = end = 0).
    """
    rows = _squad_windows(examples, tokenizer, settings, training)
    return _pack_squad_windows(rows, settings.max_seq_length, training)


def _squad_windows(examples: Sequence[SquadExample], tokenizer: BertTokenizer,
                   settings: FeatureSettings, training: bool) -> list[tuple]:
    """The windows of every example, in order, as rows (example index, ids,
    token_to_orig, is_max_context, start, end, query length); ids are unpadded."""
    T = settings.max_seq_length
    questions = tokenize_texts(tokenizer, [e.question_text for e in examples])

    # Tokenize each distinct paragraph once (questions share paragraphs).
    paragraphs = {}  # context -> (paragraph index, whitespace words)
    for e in examples:
        paragraphs.setdefault(e.context_text, (len(paragraphs), e.doc_tokens))
    doc_ids, word_counts = tokenize_words(tokenizer, [w for _, w in paragraphs.values()])

    answerable = [i for i, e in enumerate(examples) if training and not e.is_impossible]
    answer_ids = dict(zip(answerable, tokenize_texts(
        tokenizer, [examples[i].orig_answer_text for i in answerable])))

    rows = []  # (example index, ids, token_to_orig, is_max, start, end, query length)
    for i, example in enumerate(examples):
        p = paragraphs[example.context_text][0]
        doc, counts = doc_ids[p], word_counts[p]
        tok_to_orig = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        orig_to_tok = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        query = questions[i][:settings.max_query_length]
        max_tokens_for_doc = T - len(query) - 3  # [CLS], [SEP], [SEP]
        if max_tokens_for_doc < 1:
            raise ValueError(f"max_seq_length={T} leaves no room for the context after a "
                             f"{len(query)}-token question; raise max_seq_length or lower "
                             f"max_query_length")

        tok_start = tok_end = -1
        if training and not example.is_impossible:
            tok_start = orig_to_tok[example.start_position]
            # The answer ends before the first piece of the next word.
            tok_end = orig_to_tok[example.end_position + 1] - 1
            tok_start, tok_end = improve_answer_span(doc, tok_start, tok_end, answer_ids[i])

        spans = doc_spans(len(doc), max_tokens_for_doc, settings.doc_stride)
        best = max_context_span(spans, len(doc))
        offset = len(query) + 2  # window token j sits at position offset + j
        for s, (start, length) in enumerate(spans):
            ids = np.concatenate([[tokenizer.cls_id], query, [tokenizer.sep_id],
                                  doc[start:start + length], [tokenizer.sep_id]])
            start_position = end_position = 0
            if tok_start >= start and tok_end <= start + length - 1:
                start_position = tok_start - start + offset
                end_position = tok_end - start + offset
            rows.append((i, ids, tok_to_orig[start:start + length],
                         best[start:start + length] == s, start_position, end_position,
                         len(query)))
    return rows


def _pack_squad_windows(rows: list[tuple], T: int, training: bool) -> dict:
    """`_squad_windows` rows -> the padded feature arrays [F, T] and [F]."""
    F = len(rows)
    features = _empty_rows(F, T)
    features.update(example_index=np.zeros(F, np.int32),
                    token_to_orig=np.full((F, T), -1, np.int32),
                    token_is_max_context=np.zeros((F, T), bool))
    if training:
        features.update(start_positions=np.zeros(F, np.int32),
                        end_positions=np.zeros(F, np.int32))
    for f, (i, ids, to_orig, is_max, start, end, query_length) in enumerate(rows):
        n, offset = len(ids), query_length + 2
        features["input_ids"][f, :n] = ids
        features["input_mask"][f, :n] = 1
        features["segment_ids"][f, offset:n] = 1
        features["example_index"][f] = i
        features["token_to_orig"][f, offset:offset + len(to_orig)] = to_orig
        features["token_is_max_context"][f, offset:offset + len(is_max)] = is_max
        if training:
            features["start_positions"][f] = start
            features["end_positions"][f] = end
    return features


# ---------------------------------------------------------------------------------------
# CoNLL-2003: first-piece labels with document context
# ---------------------------------------------------------------------------------------

def context_window(first: int, last: int, doc_length: int, budget: int) -> tuple[int, int]:
    """[start, end) of `budget` tokens around the sentence [first, last), centred so the
    sentence gets as much document context on both sides as the document allows."""
    extra = budget - (last - first)
    start = max(0, first - extra // 2)
    end = min(doc_length, start + budget)
    return max(0, end - budget), end


def ner_features(task: str, sentences: Sequence[readers.NerSentence],
                 tokenizer: BertTokenizer, settings: FeatureSettings,
                 labelled: bool = True) -> dict:
    """One window per sentence: `[CLS] ... sentence in its document ... [SEP]`.

    The paper: "we include the maximal document context provided by the data". Each
    sentence is packed with the sentences around it in its -DOCSTART- document, centred
    (`context_window`); only the target sentence's tokens are scored. A word's tag sits
    on its first WordPiece; continuation pieces and context tokens have label weight 0.
    A sentence longer than T - 2 pieces is split into windows of its own pieces.
    """
    T = settings.max_seq_length
    budget = T - 2
    tag_ids = {tag: k for k, tag in enumerate(get_task(task).labels)}
    piece_ids, word_counts = tokenize_words(tokenizer, [s.words for s in sentences])

    documents: dict[int, list[int]] = {}
    for i, sentence in enumerate(sentences):
        documents.setdefault(sentence.doc_id, []).append(i)

    # (sentence index, window ids, {position in window: word index}, the sentence's
    # [start, end) in the window)
    rows = []
    for members in documents.values():
        doc = np.concatenate([piece_ids[i] for i in members])
        offset = 0
        for i in members:
            first, last = offset, offset + len(piece_ids[i])
            offset = last
            # First piece of every word that has pieces, as a document position.
            starts = first + np.concatenate([[0], np.cumsum(word_counts[i])[:-1]])
            has_pieces = word_counts[i] > 0
            windows = ([context_window(first, last, len(doc), budget)]
                       if last - first <= budget else
                       [(a, min(a + budget, last)) for a in range(first, last, budget)])
            for a, b in windows:
                words = {int(p - a): w for w, p in enumerate(starts)
                         if has_pieces[w] and a <= p < b}
                rows.append((i, doc[a:b], words, (max(first, a) - a, min(last, b) - a)))

    F = len(rows)
    features = _empty_rows(F, T)
    features.update(labels=np.zeros((F, T), np.int32),
                    label_weights=np.zeros((F, T), np.float32),
                    sentence_index=np.zeros(F, np.int32),
                    word_index=np.full((F, T), -1, np.int32),
                    sentence_mask=np.zeros((F, T), np.int32))
    for f, (i, window, words, (start, end)) in enumerate(rows):
        n = len(window) + 2
        features["input_ids"][f, :n] = np.concatenate(
            [[tokenizer.cls_id], window, [tokenizer.sep_id]])
        features["input_mask"][f, :n] = 1
        features["sentence_index"][f] = i
        features["sentence_mask"][f, start + 1:end + 1] = 1  # + 1 for [CLS]
        for position, w in words.items():
            features["word_index"][f, position + 1] = w  # + 1 for [CLS]
            features["label_weights"][f, position + 1] = 1.0
            if labelled:
                features["labels"][f, position + 1] = tag_ids[sentences[i].tags[w]]
    return features


_CONVERTERS = {CLASSIFICATION: sentence_features, REGRESSION: sentence_features,
               MULTIPLE_CHOICE: swag_features, SPAN: squad_features, TOKEN: ner_features}


def convert_examples(task: str, examples: Sequence, tokenizer: BertTokenizer,
                     settings: FeatureSettings, labelled: bool, training: bool) -> dict:
    """Examples of `task` -> features (see the module docstring for the arrays).

    Args:
        labelled: the examples carry gold labels (not GLUE/SWAG test sets).
        training: SQuAD: compute answer positions (the examples come from the train split).
    """
    kind = get_task(task).kind
    flag = training if kind == SPAN else labelled
    return _CONVERTERS[kind](task, examples, tokenizer, settings, flag)


def num_rows(features: dict) -> int:
    """F, the number of model inputs (SQuAD windows, NER windows, examples otherwise)."""
    return len(features["input_ids"])


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------

def _example_identity(kind: str, example) -> tuple:
    if kind == SPAN:  # doc_tokens and char offsets derive from the context
        return (example.qas_id, example.question_text, example.context_text, example.answers,
                example.is_impossible, example.start_position, example.end_position)
    return dataclasses.astuple(example)


def examples_fingerprint(task: str, examples: Sequence) -> str:
    """sha256 of the examples' content: texts, labels, ids, answer positions."""
    kind = get_task(task).kind
    digest = hashlib.sha256()
    for example in examples:
        digest.update(repr(_example_identity(kind, example)).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def cache_key(task: str, split: str, examples: Sequence, tokenizer: BertTokenizer,
              vocab_sha256: str, settings: FeatureSettings, labelled: bool, training: bool,
              max_examples: Optional[int]) -> dict:
    """Everything the features depend on, as a JSON-able dict."""
    return {"task": task, "split": split, "num_examples": len(examples),
            "examples_sha256": examples_fingerprint(task, examples),
            "max_examples": max_examples, "vocab_sha256": vocab_sha256,
            "lower_case": tokenizer.lower_case, "max_chars_per_word": tokenizer.max_chars_per_word,
            **dataclasses.asdict(settings), "labelled": labelled, "training": training,
            "features_version": FEATURES_VERSION}


def save_features(path: str, features: dict) -> None:
    """Writes an .npz atomically (a crash never leaves a truncated cache file)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic_open(path, "wb") as f:
        np.savez(f, **features)


def load_features(path: str) -> dict:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _load_cached(path: Optional[str]) -> Optional[dict]:
    """The cached features, or None if there are none or the file cannot be read (e.g.
    truncated by a full disk): a cache is rebuilt, never trusted or fatal."""
    if path is None or not os.path.exists(path):
        return None
    try:
        return load_features(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        logger.warning("%s: unreadable featurization cache (%s: %s); featurizing again",
                       path, type(e).__name__, e)
        return None


def load_or_convert(task: str, split: str, examples: Sequence, tokenizer: BertTokenizer,
                    vocab_sha256: str, settings: FeatureSettings, *, labelled: bool,
                    training: bool, cache_dir: Optional[str],
                    max_examples: Optional[int] = None) -> tuple[dict, dict]:
    """Features from the cache, or converted (and cached) with timing.

    Args:
        vocab_sha256: `bert_tf.files.file_sha256(vocab_file)`, part of the cache key.
        cache_dir: directory of `.npz` files; None disables caching.
        max_examples: the subset size the examples were cut to (recorded in the key).

    Returns:
        (features, stats) with stats {"examples", "features", "seconds",
        "examples_per_second", "cached", "cache_file"}.
    """
    key = cache_key(task, split, examples, tokenizer, vocab_sha256, settings, labelled,
                    training, max_examples)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"{task}-{split}-{digest}.npz") if cache_dir else None
    began = time.perf_counter()
    features = _load_cached(path)
    cached = features is not None
    if not cached:
        features = convert_examples(task, examples, tokenizer, settings, labelled, training)
        if path:
            save_features(path, features)
    seconds = time.perf_counter() - began
    stats = {"examples": len(examples), "features": num_rows(features),
             "seconds": round(seconds, 3),
             "examples_per_second": round(len(examples) / max(seconds, 1e-9), 1),
             "cached": cached, "cache_file": path}
    logger.info("%s %s: %d examples -> %d features in %.2f s (%.0f examples/s%s)", task,
                split, len(examples), stats["features"], seconds,
                stats["examples_per_second"], ", from cache" if cached else "")
    return features, stats
