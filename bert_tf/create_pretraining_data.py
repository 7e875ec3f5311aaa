"""Pretraining data: raw text -> sharded TFRecords of BERT training instances.

    python -m bert_tf.create_pretraining_data --input_files 'pretraining/*/*,more/*.txt' \\
        --vocab_file vocab.txt --output_dir pretrain_128 --max_seq_length 128 \\
        --max_predictions_per_seq 20 --masked_lm_prob 0.15 --dupe_factor 1 \\
        --short_seq_prob 0.1 --random_seed 12345 [--objective nsp|no_nsp|ltr] \\
        [--mask_rates 0.8,0.1,0.1] [--do_whole_word_mask] [--num_workers N]

Input formats (WikiExtractor `<doc>` files, Project Gutenberg books, one sentence per
line) are read by `text_sources`. The algorithm is google-research/bert's
`create_pretraining_data.py`, on WordPiece ids instead of token strings:

- A document's sentences are gathered into a chunk until it reaches a target length:
  `max_seq_length - 3` tokens, or with probability `short_seq_prob` a random length in
  [2, max_seq_length - 3] (to lessen the mismatch with short fine-tuning inputs).
- The chunk is split at a random sentence boundary into A and B. With probability 1/2
  (always if the chunk is one sentence) B is replaced by text from another document,
  starting at a random sentence, and the chunk's unused sentences are put back.
- The longer of A and B loses a token, from its front or back at random, until the
  pair fits.
- `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))` tokens
  other than [CLS]/[SEP] are selected (len(tokens) counts [CLS] and [SEP], as in the
  original); each becomes [MASK], stays, or becomes a token drawn uniformly from the
  whole vocabulary, at `mask_rates` (80/10/10 in the paper; Table 8's ablations are
  other rates). With `do_whole_word_mask` a word's "##" pieces are selected with it.
- Each document is used `dupe_factor` times, with different splits and masks.

Record contents. Every objective writes the original feature names and types, so
records from the original tools train here and ours train there:

  input_ids             int64 [max_seq_length]  token ids after masking, 0-padded
  input_mask            int64 [max_seq_length]  1 for real tokens, 0 for padding
  segment_ids           int64 [max_seq_length]  0 for [CLS] A [SEP], 1 for B [SEP], 0 pad
  masked_lm_positions   int64 [max_predictions_per_seq]  ascending positions, 0-padded
  masked_lm_ids         int64 [max_predictions_per_seq]  original ids there, 0-padded
  masked_lm_weights     float [max_predictions_per_seq]  1.0 per prediction, 0.0 pad
  next_sentence_labels  int64 [1]  1 = B is from another document, 0 = B follows A

For objective "nsp" (the paper: masked LM + next sentence prediction), with
max_seq_length 16 and max_predictions_per_seq 4 (15 tokens: round(2.25) = 2 picks):

  position      0     1   2   3      4  5   6     7     8  9      10 11    12 13   14    15
  tokens        [CLS] the man [MASK] to the store [SEP] he bought a  apple of milk [SEP] [PAD]
  input_mask    1     1   1   1      1  1   1     1     1  1      1  1     1  1    1     0
  segment_ids   0     0   0   0      0  0   0     0     1  1      1  1     1  1    1     0
  masked_lm_positions 3 11 0 0; masked_lm_ids = ids of "went", "gallon", 0, 0;
  masked_lm_weights 1 1 0 0; next_sentence_labels 0.
  ("went" became [MASK]; "gallon" became the random token "apple".)

- "no_nsp" (the paper's "No NSP" ablation): `[CLS] text [SEP]`, the document's tokens
  cut into consecutive segments that ignore sentence boundaries (each filled to
  max_seq_length - 2 tokens, or a short random length with probability
  short_seq_prob; a cut never splits a word's ## pieces; the last one of a document
  may be short). segment_ids all 0, next_sentence_labels 0; masked as above.
- "ltr" (the paper's left-to-right "LTR & No NSP" model): the same segments, not
  masked: masked_lm_positions/ids/weights all 0, next_sentence_labels 0. The trainer
  predicts input_ids[t + 1] from input_ids[:t + 1] with causal attention.
- With `dynamic_masking` ("nsp" or "no_nsp"), input_ids are left unmasked and the
  masked_lm_* features are all 0; `bert_tf.dynamic_masking` masks each batch anew.

Differences from the original, all for streaming with bounded memory (the original
holds the whole corpus, tokenized, in memory):

- Random next segments. The original draws them from any document of the corpus. Here
  each input file is processed on its own, and B segments come from a bounded window
  (`pool_documents` documents, `pool_tokens` tokens) over the documents of the *other*
  files, read by a second reader that starts at the next file (in input order, the
  file itself last) and moves on as many tokens as the file being processed. So a
  negative is always from another document (10 tries, as in the original; failures,
  possible only in a tiny corpus, are counted), the same excerpt is rarely drawn
  twice, and the result does not depend on `num_workers`. The price is that the
  text is read and tokenized about twice (plus `pool_tokens` per file, to fill the
  window).
- The target length is drawn anew for every segment; the original draws it once per
  document, so a whole book would be short 10% of the time.
- Long documents (over 1000 sentences) are processed in pieces of 1000 sentences; no
  instance spans two pieces, and no random next comes from the same document.
- Output order. The original shuffles all instances and deals them round-robin to its
  output files. Here each file's instances are dealt round-robin, in input order, to
  ceil(N / shard_size) shards and each shard is then shuffled in memory, so every
  shard is a random sample of the whole corpus in random order.

Memory, per worker, is one document piece, one tokenizer batch (4096 sentences) and the
window; the main process holds one shard (`shard_size` records) while shuffling it.
None of these grows with the corpus (measured: ~850 MB per process, of which ~780 MB
is TensorFlow itself).

Determinism: file i uses `random.Random(f"{seed}/{i}")` and writes its own temporary
file; shard j is shuffled with `random.Random(f"{seed}/shard/{j}")`. The same inputs,
flags and seed give the same bytes with any number of workers.
"""

import argparse
import collections
import dataclasses
import glob
import json
import math
import multiprocessing
import os
import random
import resource
import shlex
import shutil
import struct
import sys
import tempfile
import time
from typing import Iterator, NamedTuple

import tensorflow as tf
import tqdm

from bert_tf import text_sources
from bert_tf.tokenization import BertTokenizer

OBJECTIVES = ("nsp", "no_nsp", "ltr")
MAX_DOCUMENT_SENTENCES = 1000
TOKENIZE_BATCH_SENTENCES = 4096  # tf-text is fast per batch and slow per call
SHARD_PATTERN = "part-{:05d}-of-{:05d}.tfrecord"

# What `create_pretraining_data` counts, in the order it reports them.
COUNTS = (
    "files", "empty_files", "unreadable_files", "documents", "empty_documents",
    "sentences", "tokens", "invalid_utf8_lines", "long_lines_split",
    "gutenberg_without_end", "instances", "next_sentence_random",
    "random_next_from_same_document", "maskable_tokens", "masked_tokens",
    "masked_as_mask", "masked_as_same", "masked_as_random")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """How training instances are made from documents.

    Args:
        max_seq_length: T, the padded length of input_ids, [CLS] and [SEP]s included.
        max_predictions_per_seq: P, the most masked-LM predictions per instance.
        masked_lm_prob: the fraction of tokens selected for prediction.
        mask_rates: of the selected tokens, the fractions replaced by [MASK], kept, and
            replaced by a random token (sum 1).
        short_seq_prob: probability that a segment gets a random, shorter target length.
        dupe_factor: how many times each document is used (with different masks).
        do_whole_word_mask: select a word's ## pieces together with it.
        objective: "nsp", "no_nsp" or "ltr" (see the module docstring).
        dynamic_masking: write unmasked records for `bert_tf.dynamic_masking`.
        random_seed: seed of every random choice.
        pool_documents, pool_tokens: size of the window of other files' documents that
            random next segments come from.
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    mask_rates: tuple[float, float, float] = (0.8, 0.1, 0.1)
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False
    objective: str = "nsp"
    dynamic_masking: bool = False
    random_seed: int = 12345
    pool_documents: int = 1000
    pool_tokens: int = 250_000

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        min_length = 5 if self.objective == "nsp" else 3  # specials + 1 token per segment
        if self.max_seq_length < min_length:
            raise ValueError(f"max_seq_length must be >= {min_length} for objective "
                             f"{self.objective!r}, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be >= 1, got "
                             f"{self.max_predictions_per_seq}")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if (len(self.mask_rates) != 3 or min(self.mask_rates) < 0
                or abs(sum(self.mask_rates) - 1.0) > 1e-6):
            raise ValueError(f"mask_rates must be three non-negative fractions "
                             f"([MASK], same, random) that sum to 1, got {self.mask_rates}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if self.pool_documents < 1 or self.pool_tokens < 1:
            raise ValueError("pool_documents and pool_tokens must be >= 1")

    @property
    def static_masks(self) -> bool:
        """Whether masks are written into the records."""
        return self.objective != "ltr" and not self.dynamic_masking


class Vocab(NamedTuple):
    """What instance creation needs to know about the vocabulary."""
    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_subword: list[bool]  # [size]: the piece starts with "##"

    @classmethod
    def from_tokenizer(cls, tokenizer: BertTokenizer) -> "Vocab":
        return cls(tokenizer.vocab_size, tokenizer.cls_id, tokenizer.sep_id,
                   tokenizer.mask_id, [t.startswith("##") for t in tokenizer.vocab])


class Instance(NamedTuple):
    """One training instance, before padding."""
    input_ids: list[int]  # [CLS] A [SEP] (B [SEP]), after masking
    segment_ids: list[int]
    masked_lm_positions: list[int]  # ascending
    masked_lm_ids: list[int]  # the original ids at those positions
    next_sentence_label: int  # 1: B is from another document


# A document is a list of sentences, each a list of WordPiece ids; its source is
# (file index, document index), shared by the pieces of a long document.
Source = tuple[int, int]
Document = list[list[int]]


# ----------------------------------------------------------------------------------
# Instance creation (the original algorithm, on ids).

def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int,
                      rng: random.Random) -> None:
    """Shortens the longer list (B on ties) by one token at a time until the pair fits.

    The token comes off the front or the back at random "to add more randomness and
    avoid biases" (the pretraining variant of the original; fine-tuning's
    `tokenization.truncate_seq_pair` always drops from the back).
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def create_masked_lm_predictions(tokens: list[int], config: DataConfig, vocab: Vocab,
                                 rng: random.Random, stats: collections.Counter):
    """Masks a packed sequence. Returns (masked tokens, positions, original ids)."""
    candidates = []  # lists of positions that are selected together
    for i, token in enumerate(tokens):
        if token == vocab.cls_id or token == vocab.sep_id:
            continue
        if config.do_whole_word_mask and candidates and vocab.is_subword[token]:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    rng.shuffle(candidates)
    num_to_predict = min(config.max_predictions_per_seq,
                         max(1, int(round(len(tokens) * config.masked_lm_prob))))

    mask_rate, same_rate, random_rate = config.mask_rates
    # The original's two draws: random() < 0.8, then random() < 0.5 among the rest.
    same_given_not_mask = same_rate / (same_rate + random_rate) if mask_rate < 1 else 0.0
    output = list(tokens)
    positions = []
    for index_set in candidates:
        if len(positions) >= num_to_predict:
            break
        # A whole word that would exceed the budget is skipped, as in the original.
        if len(positions) + len(index_set) > num_to_predict:
            continue
        for index in index_set:
            if rng.random() < mask_rate:
                output[index] = vocab.mask_id
                stats["masked_as_mask"] += 1
            elif rng.random() < same_given_not_mask:
                stats["masked_as_same"] += 1
            else:
                output[index] = rng.randint(0, vocab.size - 1)
                stats["masked_as_random"] += 1
            positions.append(index)
    positions.sort()
    stats["maskable_tokens"] += sum(map(len, candidates))
    stats["masked_tokens"] += len(positions)
    return output, positions, [tokens[i] for i in positions]


def _target_length(max_num_tokens: int, config: DataConfig, rng: random.Random) -> int:
    # Usually fill the sequence (padding is wasted compute), sometimes a shorter one.
    if rng.random() < config.short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _make_instance(segments: list[list[int]], is_random_next: bool, config: DataConfig,
                   vocab: Vocab, rng: random.Random,
                   stats: collections.Counter) -> Instance:
    tokens, segment_ids = [vocab.cls_id], [0]
    for segment_id, segment in enumerate(segments):
        tokens += segment + [vocab.sep_id]
        segment_ids += [segment_id] * (len(segment) + 1)
    positions, labels = [], []
    if config.static_masks:
        tokens, positions, labels = create_masked_lm_predictions(tokens, config, vocab,
                                                                 rng, stats)
    stats["instances"] += 1
    stats["next_sentence_random"] += int(is_random_next)
    return Instance(tokens, segment_ids, positions, labels, int(is_random_next))


class RandomDocumentPool:
    """Where random next segments come from: a moving window over other documents.

    The window is filled to `max_tokens` at the start and then reads on as many tokens
    as the caller processes (`advance`), dropping its oldest documents to stay within
    `max_documents` and `max_tokens` (it always keeps the newest one).

    Args:
        documents: an iterator of (source, document), the other files' documents.
        max_documents, max_tokens: the size of the window.
    """

    def __init__(self, documents: Iterator[tuple[Source, Document]], max_documents: int,
                 max_tokens: int):
        self._documents = documents
        self._max_documents = max_documents
        self._max_tokens = max_tokens
        self._window = collections.deque()  # (source, document, num_tokens)
        self._window_tokens = 0
        self._budget = 0  # how many tokens may have been read so far
        self._read = 0
        self.advance(max_tokens)

    def advance(self, num_tokens: int) -> None:
        self._budget += num_tokens
        while self._read < self._budget:
            item = next(self._documents, None)
            if item is None:
                return
            source, document = item
            n = sum(map(len, document))
            self._read += n
            self._window.append((source, document, n))
            self._window_tokens += n
            while len(self._window) > 1 and (len(self._window) > self._max_documents or
                                             self._window_tokens > self._max_tokens):
                self._window_tokens -= self._window.popleft()[2]

    def sample(self, rng: random.Random, avoid: Source) -> tuple[Source, Document] | None:
        """A random document, from a source other than `avoid` if 10 tries find one
        (as in the original); None if the window is empty."""
        if not self._window:
            return None
        for _ in range(10):
            source, document, _ = self._window[rng.randrange(len(self._window))]
            if source != avoid:
                break
        return source, document


def create_nsp_instances(document: Document, source: Source, pool: RandomDocumentPool,
                         config: DataConfig, vocab: Vocab, rng: random.Random,
                         stats: collections.Counter) -> Iterator[Instance]:
    """Sentence-pair instances from one document (`create_instances_from_document`)."""
    max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP]
    target_length = _target_length(max_num_tokens, config, rng)
    chunk, chunk_length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            # How many of the chunk's sentences go into A.
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                tokens_b = _random_next_segment(pool, source, document,
                                                target_length - len(tokens_a), rng, stats)
                i -= len(chunk) - a_end  # put the unused sentences back
            else:
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            yield _make_instance([tokens_a, tokens_b], is_random_next, config, vocab, rng,
                                 stats)
            chunk, chunk_length = [], 0
            target_length = _target_length(max_num_tokens, config, rng)
        i += 1


def _random_next_segment(pool: RandomDocumentPool | None, source: Source,
                         document: Document, target_length: int, rng: random.Random,
                         stats: collections.Counter) -> list[int]:
    """Sentences of another document from a random one on, to about `target_length`."""
    sample = pool.sample(rng, avoid=source) if pool is not None else None
    if sample is None or sample[0] == source:
        stats["random_next_from_same_document"] += 1
    other = document if sample is None else sample[1]
    tokens = []
    for sentence in other[rng.randint(0, len(other) - 1):]:
        tokens.extend(sentence)
        if len(tokens) >= target_length:
            break
    return tokens


def create_packed_instances(document: Document, config: DataConfig, vocab: Vocab,
                            rng: random.Random,
                            stats: collections.Counter) -> Iterator[Instance]:
    """Single-segment instances of contiguous text ("no_nsp" and "ltr")."""
    tokens = [t for sentence in document for t in sentence]
    max_num_tokens = config.max_seq_length - 2  # [CLS], [SEP]
    start = 0
    while start < len(tokens):
        end = min(start + _target_length(max_num_tokens, config, rng), len(tokens))
        # Keep a word's ## pieces with it: end the segment before the word that the cut
        # would split, unless the segment is one long word.
        cut = end
        while cut < len(tokens) and cut > start and vocab.is_subword[tokens[cut]]:
            cut -= 1
        if cut > start:
            end = cut
        yield _make_instance([tokens[start:end]], False, config, vocab, rng, stats)
        start = end


def instance_to_example(instance: Instance, max_seq_length: int,
                        max_predictions_per_seq: int) -> tf.train.Example:
    """Pads an instance into the original feature names and types."""
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    n, k = len(instance.input_ids), len(instance.masked_lm_positions)
    pad, pad_predictions = [0] * (max_seq_length - n), [0] * (max_predictions_per_seq - k)
    features = {
        "input_ids": ints(instance.input_ids + pad),
        "input_mask": ints([1] * n + pad),
        "segment_ids": ints(instance.segment_ids + pad),
        "masked_lm_positions": ints(instance.masked_lm_positions + pad_predictions),
        "masked_lm_ids": ints(instance.masked_lm_ids + pad_predictions),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
            value=[1.0] * k + [0.0] * len(pad_predictions))),
        "next_sentence_labels": ints([instance.next_sentence_label]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


# ----------------------------------------------------------------------------------
# Reading: files -> tokenized documents.

def _tokenize(batch: list[tuple[Source, list[str]]],
              tokenizer: BertTokenizer) -> list[tuple[Source, Document]]:
    """Tokenizes the sentences of many documents in one call."""
    sentences = [s for _, document in batch for s in document]
    ragged = tokenizer.tokenize(sentences)  # [S, (pieces)]
    ids = ragged.flat_values.numpy().tolist()
    splits = ragged.row_splits.numpy().tolist()
    out, k = [], 0
    for source, document in batch:
        # A sentence of only control characters has no pieces; drop it, as the original.
        tokens = [ids[splits[j]:splits[j + 1]] for j in range(k, k + len(document))]
        tokens = [t for t in tokens if t]
        k += len(document)
        if tokens:
            out.append((source, tokens))
    return out


def tokenized_documents(path: str, file_index: int, tokenizer: BertTokenizer,
                        stats: collections.Counter) -> Iterator[tuple[Source, Document]]:
    """Streams one file's documents as WordPiece ids, tokenizing in large batches."""
    batch, num_sentences = [], 0
    for index, sentences in text_sources.read_documents(
            path, stats, max_document_sentences=MAX_DOCUMENT_SENTENCES):
        batch.append(((file_index, index), sentences))
        num_sentences += len(sentences)
        if num_sentences >= TOKENIZE_BATCH_SENTENCES:
            yield from _tokenize(batch, tokenizer)
            batch, num_sentences = [], 0
    if batch:
        yield from _tokenize(batch, tokenizer)


def _other_files_documents(files: list[str], file_index: int,
                           tokenizer: BertTokenizer) -> Iterator[tuple[Source, Document]]:
    """The documents of the files after `file_index`, then before it, then its own."""
    order = list(range(file_index + 1, len(files))) + list(range(file_index + 1))
    for j in order:
        try:
            # Not counted: each file is counted once, when it is processed itself.
            yield from tokenized_documents(files[j], j, tokenizer, collections.Counter())
        except OSError:
            pass


# ----------------------------------------------------------------------------------
# One input file -> one temporary TFRecord file (runs in a worker process).

_worker = {}  # the tokenizer and Vocab of this process, made by _init_worker


def _init_worker(vocab_file: str, lower_case: bool | None, single_thread: bool) -> None:
    if single_thread:  # one process per core; TF's own threads would only compete
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    _worker.update(tokenizer=tokenizer, vocab=Vocab.from_tokenizer(tokenizer))


def _process_file(task: tuple[int, list[str], DataConfig, str]):
    """Writes the instances of files[file_index] to out_path; returns its counts."""
    file_index, files, config, out_path = task
    tokenizer, vocab = _worker["tokenizer"], _worker["vocab"]
    path = files[file_index]
    stats, problems = collections.Counter(files=1), []
    rng = random.Random(f"{config.random_seed}/{file_index}")
    pool = None
    if config.objective == "nsp":
        pool = RandomDocumentPool(_other_files_documents(files, file_index, tokenizer),
                                  config.pool_documents, config.pool_tokens)
    with tf.io.TFRecordWriter(out_path) as writer:
        try:
            for source, document in tokenized_documents(path, file_index, tokenizer, stats):
                num_tokens = sum(map(len, document))
                stats["tokens"] += num_tokens
                if pool is not None:
                    pool.advance(num_tokens)
                for _ in range(config.dupe_factor):
                    if config.objective == "nsp":
                        instances = create_nsp_instances(document, source, pool, config,
                                                         vocab, rng, stats)
                    else:
                        instances = create_packed_instances(document, config, vocab, rng,
                                                            stats)
                    for instance in instances:
                        example = instance_to_example(instance, config.max_seq_length,
                                                      config.max_predictions_per_seq)
                        writer.write(example.SerializeToString(deterministic=True))
        except OSError as e:
            stats["unreadable_files"] += 1
            problems.append(f"{path}: unreadable ({e})")
    if not stats["unreadable_files"] and not stats["documents"]:
        stats["empty_files"] += 1
        problems.append(f"{path}: no documents")
    return file_index, stats, problems


# ----------------------------------------------------------------------------------
# The whole run.

def expand_input_patterns(patterns: str) -> list[str]:
    """Comma-separated globs (`**` recurses) -> files, each glob's matches sorted.

    Raises ValueError for a glob that matches no file (directories do not count).
    """
    files = {}  # an ordered set
    for pattern in filter(None, (p.strip() for p in patterns.split(","))):
        matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matches:
            raise ValueError(f"--input_files: {pattern!r} matches no file")
        files.update(dict.fromkeys(matches))
    if not files:
        raise ValueError("--input_files is empty")
    return list(files)


def _raise_open_file_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise ValueError(f"{needed} shards need {needed} open files but the limit is "
                             f"{hard}; raise --shard_size")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _read_records(path: str) -> Iterator[bytes]:
    """The records of a TFRecord file that we have just written (CRCs not checked).

    Each record is: length (uint64 LE), CRC of the length (4 bytes), data, CRC (4 bytes).
    """
    with open(path, "rb") as f:
        while header := f.read(12):
            (length,) = struct.unpack("<Q", header[:8])
            yield f.read(length)
            f.read(4)


def _write_shards(parts: list[str], num_instances: int, output_dir: str, shard_size: int,
                  seed: int, tmp_dir: str) -> list[dict]:
    """Deals the per-file records round-robin to shards, then shuffles each shard."""
    num_shards = max(1, math.ceil(num_instances / shard_size))
    _raise_open_file_limit(num_shards + 64)
    buckets = [os.path.join(tmp_dir, f"bucket-{j:05d}") for j in range(num_shards)]
    writers = [tf.io.TFRecordWriter(b) for b in buckets]
    k = 0
    for part in parts:
        for record in _read_records(part):
            writers[k % num_shards].write(record)
            k += 1
        os.remove(part)
    for writer in writers:
        writer.close()

    shards = []
    for j, bucket in enumerate(buckets):
        records = list(_read_records(bucket))
        random.Random(f"{seed}/shard/{j}").shuffle(records)
        name = SHARD_PATTERN.format(j, num_shards)
        with tf.io.TFRecordWriter(os.path.join(output_dir, name)) as writer:
            for record in records:
                writer.write(record)
        os.remove(bucket)
        shards.append({"file": name, "instances": len(records)})
    return shards


def _peak_rss_mb() -> dict:
    # ru_maxrss is in KiB on Linux; for children it is the largest finished child (the
    # workers, and a helper that importing TF runs). Importing TF alone takes ~780 MB.
    return {"main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "largest_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def create_pretraining_data(input_files: list[str], vocab_file: str, output_dir: str,
                            config: DataConfig, lower_case: bool | None = None,
                            num_workers: int = 1, shard_size: int = 10_000,
                            overwrite: bool = False, command: str | None = None,
                            progress: bool = True) -> dict:
    """Writes `output_dir/part-*-of-*.tfrecord` and `metadata.json`; returns the metadata.

    Args:
        input_files: text files, in the order that fixes the output (see
            `expand_input_patterns`).
        vocab_file: WordPiece vocabulary.
        output_dir: where the shards and metadata.json go.
        config: how instances are made.
        lower_case: lowercase the text; None infers it from the vocabulary.
        num_workers: processes, one input file at a time each (1: in this process).
        shard_size: instances per output shard (about).
        overwrite: replace shards already in output_dir instead of failing.
        command: the command line, recorded in metadata.json.
        progress: show a progress bar on stderr.

    Raises:
        ValueError: bad arguments, or no instance could be made from the input.
    """
    if not input_files:
        raise ValueError("no input files")
    if not os.path.isfile(vocab_file):
        raise ValueError(f"vocab_file not found: {vocab_file}")
    if num_workers < 1 or shard_size < 1:
        raise ValueError("num_workers and shard_size must be >= 1")
    os.makedirs(output_dir, exist_ok=True)
    old = glob.glob(os.path.join(output_dir, "part-*-of-*.tfrecord"))
    if old and not overwrite:
        raise ValueError(f"{output_dir} already holds {len(old)} shards; remove them or "
                         f"pass overwrite=True (--overwrite)")
    for path in old:
        os.remove(path)

    start = time.time()
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)  # checks the vocabulary
    vocab = Vocab.from_tokenizer(tokenizer)
    tmp_dir = tempfile.mkdtemp(prefix=".tmp-", dir=output_dir)
    try:
        parts = [os.path.join(tmp_dir, f"file-{i:05d}.tfrecord")
                 for i in range(len(input_files))]
        tasks = [(i, input_files, config, parts[i]) for i in range(len(input_files))]
        sizes = [os.path.getsize(f) if os.path.exists(f) else 0 for f in input_files]
        stats, problems = collections.Counter(), {}
        bar = tqdm.tqdm(total=sum(sizes), unit="B", unit_scale=True, file=sys.stderr,
                        desc="create_pretraining_data", disable=not progress,
                        mininterval=2.0)
        if num_workers == 1:
            _worker.update(tokenizer=tokenizer, vocab=vocab)
            results = map(_process_file, tasks)
            pool = None
        else:
            # "spawn": each worker imports TF afresh (forking a process that already runs
            # TF threads is unsafe).
            pool = multiprocessing.get_context("spawn").Pool(
                num_workers, initializer=_init_worker,
                initargs=(vocab_file, lower_case, True))
            results = pool.imap_unordered(_process_file, tasks)
        for file_index, file_stats, file_problems in results:
            stats.update(file_stats)
            problems[file_index] = file_problems
            bar.update(sizes[file_index])
            bar.set_postfix(instances=stats["instances"], refresh=False)
        bar.close()
        if pool is not None:
            pool.close()
            pool.join()  # so that RUSAGE_CHILDREN sees the workers

        skipped = [p for i in sorted(problems) for p in problems[i]]
        metadata = {
            "command": command,
            "input_files": len(input_files),
            "vocab_file": os.path.abspath(vocab_file),
            "vocab_size": vocab.size,
            "lower_case": tokenizer.lower_case,
            "config": dataclasses.asdict(config),
            "random_seed": config.random_seed,
            "num_workers": num_workers,
            "shard_size": shard_size,
            "feature_spec": {name: {"shape": spec.shape, "dtype": spec.dtype.name}
                             for name, spec in feature_spec(
                                 config.max_seq_length,
                                 config.max_predictions_per_seq).items()},
            "counts": {key: stats[key] for key in COUNTS},
            "skipped": skipped,
        }
        num_instances = stats["instances"]
        if num_instances == 0:
            metadata["shards"] = []
            _write_json(metadata, output_dir)
            raise ValueError(
                f"no training instances were made from {len(input_files)} input files "
                f"({stats['documents']} documents, {stats['tokens']} tokens); "
                f"skipped: {skipped[:5]}; see {output_dir}/metadata.json")
        metadata["shards"] = _write_shards(parts, num_instances, output_dir, shard_size,
                                           config.random_seed, tmp_dir)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)

    seconds = time.time() - start
    metadata.update(num_instances=num_instances, seconds=round(seconds, 1),
                    instances_per_second=round(num_instances / seconds, 1),
                    peak_rss_mb=_peak_rss_mb())
    _write_json(metadata, output_dir)
    return metadata


def _write_json(metadata: dict, output_dir: str) -> None:
    with open(os.path.join(output_dir, "metadata.json"), "w") as f:
        json.dump(metadata, f, indent=2)
        f.write("\n")


# ----------------------------------------------------------------------------------
# Reading the records back (the trainer's input pipeline).

def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The original `run_pretraining.py` feature spec."""
    def ints(n):
        return tf.io.FixedLenFeature([n], tf.int64)

    return {
        "input_ids": ints(max_seq_length),
        "input_mask": ints(max_seq_length),
        "segment_ids": ints(max_seq_length),
        "masked_lm_positions": ints(max_predictions_per_seq),
        "masked_lm_ids": ints(max_predictions_per_seq),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": ints(1),
    }


def decode_record(serialized: tf.Tensor, max_seq_length: int,
                  max_predictions_per_seq: int) -> dict:
    """Serialized examples [B] -> features [B, T] / [B, P] / [B, 1], int64 -> int32.

    A scalar string gives unbatched features. int32 because TPUs do not take int64.
    """
    features = tf.io.parse_example(serialized,
                                   feature_spec(max_seq_length, max_predictions_per_seq))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


def make_pretraining_dataset(file_pattern: str, batch_size: int, max_seq_length: int,
                             max_predictions_per_seq: int, is_training: bool,
                             seed: int | None = None,
                             input_context: tf.distribute.InputContext | None = None,
                             dynamic_masking=None) -> tf.data.Dataset:
    """Batches of decoded pretraining records.

    Training: shards in a seeded random order, repeated, 8 read at a time and
    interleaved, then shuffled in a 1000-record buffer. Evaluation: shards in order,
    once. Batches always have the same size (drop_remainder) for static shapes (TPU).

    Args:
        file_pattern: comma-separated globs of TFRecord files.
        batch_size: the global batch size; with `input_context` each input pipeline
            yields batches of `input_context.get_per_replica_batch_size(batch_size)`.
        max_seq_length, max_predictions_per_seq: T and P of the records.
        is_training: shuffle and repeat.
        seed: the shuffle seed (fix it for reproducible runs and exact resumption).
        input_context: from `strategy.distribute_datasets_from_function`; each input
            pipeline then reads its own subset of the shards (or of the records, if
            there are fewer shards than pipelines).
        dynamic_masking: `bert_tf.dynamic_masking.DynamicMasking(...)` (or any function
            of a batch of features and a [2] seed), applied after decoding. Its seeds
            come from `seed` (0 for evaluation if None).
    """
    files = []
    for pattern in filter(None, (p.strip() for p in file_pattern.split(","))):
        files += sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise ValueError(f"no TFRecord files match {file_pattern!r}")

    num_pipelines = input_context.num_input_pipelines if input_context else 1
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    # Each input pipeline reads its own shards, or its own records if shards are too few.
    shard_records = 1 < num_pipelines > len(files)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if num_pipelines > 1 and not shard_records:
        dataset = dataset.shard(num_pipelines, input_context.input_pipeline_id)

    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
        dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(8, len(files)),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        dataset = tf.data.TFRecordDataset(dataset)
    if shard_records:
        dataset = dataset.shard(num_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(1000, seed=seed)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(
        lambda records: decode_record(records, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE)
    if dynamic_masking is not None:
        # A seed per batch from a seeded stream that is part of the iterator's state, so
        # the masks are reproducible and survive a checkpoint restore. Evaluation always
        # gets the same masks.
        mask_seed = 0 if seed is None and not is_training else seed
        seeds = tf.data.Dataset.random(seed=mask_seed).batch(2)  # [2] int64 per batch
        dataset = tf.data.Dataset.zip(dataset, seeds).map(
            dynamic_masking, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


# ----------------------------------------------------------------------------------

def _parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bert_tf.create_pretraining_data",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--input_files", required=True,
                   help="comma-separated globs of text files (** recurses)")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--output_dir", required=True)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--masked_lm_prob", type=float, default=0.15)
    p.add_argument("--mask_rates", default="0.8,0.1,0.1",
                   help="fractions of selected tokens -> [MASK], same, random token")
    p.add_argument("--dupe_factor", type=int, default=10,
                   help="times each document is used, with different masks")
    p.add_argument("--short_seq_prob", type=float, default=0.1)
    p.add_argument("--random_seed", type=int, default=12345)
    p.add_argument("--do_whole_word_mask", action="store_true")
    p.add_argument("--objective", choices=OBJECTIVES, default="nsp")
    p.add_argument("--dynamic_masking", action="store_true",
                   help="write unmasked records for bert_tf.dynamic_masking")
    p.add_argument("--do_lower_case", choices=("auto", "true", "false"), default="auto",
                   help="auto: uncased if the vocabulary has no capitals")
    p.add_argument("--num_workers", type=int, default=1)
    p.add_argument("--shard_size", type=int, default=10_000, help="instances per shard")
    p.add_argument("--pool_documents", type=int, default=1000,
                   help="random next segments come from this many recent documents")
    p.add_argument("--pool_tokens", type=int, default=250_000,
                   help="... holding at most this many tokens")
    p.add_argument("--overwrite", action="store_true",
                   help="replace shards already in --output_dir")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # also for the workers
    try:
        rates = tuple(float(r) for r in args.mask_rates.split(","))
        config = DataConfig(
            max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions_per_seq,
            masked_lm_prob=args.masked_lm_prob, mask_rates=rates,
            short_seq_prob=args.short_seq_prob, dupe_factor=args.dupe_factor,
            do_whole_word_mask=args.do_whole_word_mask, objective=args.objective,
            dynamic_masking=args.dynamic_masking, random_seed=args.random_seed,
            pool_documents=args.pool_documents, pool_tokens=args.pool_tokens)
        input_files = expand_input_patterns(args.input_files)
        lower_case = {"auto": None, "true": True, "false": False}[args.do_lower_case]
        metadata = create_pretraining_data(
            input_files, args.vocab_file, args.output_dir, config, lower_case=lower_case,
            num_workers=args.num_workers, shard_size=args.shard_size,
            overwrite=args.overwrite,
            command="python -m bert_tf.create_pretraining_data " + shlex.join(argv))
    except ValueError as e:
        sys.exit(f"error: {e}")

    counts, rss = metadata["counts"], metadata["peak_rss_mb"]
    print(f"{metadata['num_instances']} instances in {len(metadata['shards'])} shards "
          f"under {args.output_dir} from {counts['files']} files, {counts['documents']} "
          f"documents, {counts['tokens']} tokens", file=sys.stderr)
    print(f"{metadata['seconds']:.1f} s, {metadata['instances_per_second']:.1f} "
          f"instances/s; peak memory {rss['main']:.0f} MB (main), "
          f"{rss['largest_child']:.0f} MB (largest worker)", file=sys.stderr)
    bad = {k: counts[k] for k in ("empty_files", "unreadable_files", "empty_documents",
                                  "invalid_utf8_lines", "long_lines_split",
                                  "gutenberg_without_end",
                                  "random_next_from_same_document") if counts[k]}
    if bad:
        print(f"skipped or repaired: {bad}", file=sys.stderr)


if __name__ == "__main__":
    main()
