"""SQuAD JSON -> `SquadExample`s, as google-research/bert's `read_squad_examples` builds
them: contexts split on whitespace, training answers aligned to whitespace tokens.

`readers.read_examples("squad1.1" | "squad2.0", ...)` finds the file and calls
`read_squad_file`; `squad_examples` serves articles that come from elsewhere (tfds,
tests, a subset of a file).
"""

import dataclasses
import gzip
import json
import re
from typing import Optional

import numpy as np

from glue_suite.bad_rows import BadRows, DataFormatError, decode_utf8


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One SQuAD question, with its context split as google-research/bert splits it.

    Args:
        qas_id: the question id (key of prediction files).
        question_text: the question.
        context_text: the paragraph.
        doc_tokens: the paragraph split on whitespace (space, tab, CR, LF, U+202F);
            shared by all questions of the paragraph.
        char_to_word_offset: for every character of the paragraph, the index of the
            doc token it belongs to (whitespace maps to the preceding token).
        answers: gold answer texts (dev keeps all of them; empty if unanswerable).
        is_impossible: SQuAD v2.0 unanswerable question (read on dev too, where the
            original leaves it False; features for evaluation do not use it).
        start_position: training only: first doc token of the answer (-1 if impossible).
        end_position: training only: last doc token of the answer (-1 if impossible).
    """
    qas_id: str
    question_text: str
    context_text: str
    doc_tokens: tuple[str, ...]
    char_to_word_offset: tuple[int, ...]
    answers: tuple[str, ...]
    is_impossible: bool
    start_position: Optional[int] = None
    end_position: Optional[int] = None

    @property
    def orig_answer_text(self) -> str:
        """The training answer, as the original `SquadExample.orig_answer_text`."""
        return self.answers[0] if self.answers and not self.is_impossible else ""


# google-research/bert's run_squad.py splits contexts on these characters only; U+202F
# (narrow no-break space) counts, other Unicode spaces do not.
_SQUAD_WHITESPACE = " \t\r\n\u202f"
_SQUAD_TOKEN = re.compile(f"[^{_SQUAD_WHITESPACE}]+")
_SQUAD_WHITESPACE_CODES = tuple(ord(c) for c in _SQUAD_WHITESPACE)


def split_context(context: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """google-research/bert's whitespace split: (doc_tokens, char_to_word_offset).

    Vectorised form of the original per-character loop (a test checks they agree):
    a token starts at every non-whitespace character after whitespace (or at the
    start), and each character maps to the number of tokens started so far, minus one.
    """
    doc_tokens = tuple(_SQUAD_TOKEN.findall(context))
    codes = np.frombuffer(context.encode("utf-32-le", "surrogatepass"), np.uint32)  # [chars]
    is_space = np.zeros(len(codes), dtype=bool)
    for code in _SQUAD_WHITESPACE_CODES:  # 5 vector compares beat np.isin on short input
        is_space |= codes == code
    starts = ~is_space & np.concatenate([[True], is_space[:-1]])
    char_to_word_offset = np.cumsum(starts) - 1
    return doc_tokens, tuple(char_to_word_offset.tolist())


def load_squad_json(path: str) -> dict:
    """The parsed SQuAD JSON (`{"version", "data"}`), gzip-compressed or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    try:
        dataset = json.loads(decode_utf8(path, raw))
    except json.JSONDecodeError as e:
        raise DataFormatError(path, e.lineno, f"not valid JSON: {e.msg}") from None
    if not isinstance(dataset, dict) or "data" not in dataset:
        raise DataFormatError(path, 1, 'expected a SQuAD file {"version": ..., "data": [...]}')
    return dataset


def read_squad_file(path: str, *, version_2: bool, training: bool,
                    bad: BadRows) -> list[SquadExample]:
    """The questions of a SQuAD JSON file; malformed ones go to `bad`."""
    return _squad_examples(load_squad_json(path)["data"], version_2, training, bad)


def squad_examples(articles: list, *, version_2: bool, training: bool,
                   skip_bad_rows: bool = False,
                   source: str = "<squad articles>") -> tuple[list[SquadExample], int]:
    """SQuAD `data` articles -> (examples, num_bad_rows), as `read_examples` builds them.

    Args:
        articles: `[{"paragraphs": [{"context", "qas": [...]}]}]` as in the JSON files.
        version_2: read `is_impossible` (SQuAD v2.0).
        training: compute answer positions, drop unrecoverable answers.
        skip_bad_rows: skip and count malformed questions instead of raising.
        source: name used in error messages.
    """
    bad = BadRows(source, skip_bad_rows)
    return _squad_examples(articles, version_2, training, bad), bad.count


def _squad_examples(articles: list, version_2: bool, training: bool,
                    bad: BadRows) -> list[SquadExample]:
    """google-research/bert's read_squad_examples, with checked inputs."""
    examples = []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph["context"]
            doc_tokens, char_to_word_offset = split_context(context)
            for qa in paragraph["qas"]:
                where = f"question {qa.get('id')!r} (article {a}, paragraph {p})"
                if not {"id", "question", "answers"} <= set(qa):
                    bad(where, "question lacks 'id', 'question' or 'answers'")
                    continue
                is_impossible = bool(qa.get("is_impossible", False)) if version_2 else False
                answers = tuple(answer["text"] for answer in qa["answers"])
                span = (None, None)  # evaluation needs no positions
                if training and is_impossible:
                    span = (-1, -1)
                elif training:
                    span = _answer_span(qa, context, doc_tokens, char_to_word_offset,
                                        where, bad)
                    if span is None:
                        continue
                examples.append(SquadExample(
                    qas_id=qa["id"], question_text=qa["question"], context_text=context,
                    doc_tokens=doc_tokens, char_to_word_offset=char_to_word_offset,
                    answers=answers, is_impossible=is_impossible,
                    start_position=span[0], end_position=span[1]))
    return examples


def _answer_span(qa: dict, context: str, doc_tokens: tuple[str, ...],
                 char_to_word_offset: tuple[int, ...], where: str,
                 bad: BadRows) -> Optional[tuple[int, int]]:
    """A training question's answer as (first, last) doc token; None when the question
    is reported to `bad` and dropped."""
    if len(qa["answers"]) != 1:
        bad(where, f"a training question needs exactly 1 answer, found {len(qa['answers'])}")
        return None
    text, offset = qa["answers"][0]["text"], qa["answers"][0]["answer_start"]
    if not text or not 0 <= offset <= len(context) - len(text):
        bad(where, f"answer {text!r} at {offset} lies outside the context "
                   f"({len(context)} characters)")
        return None
    start = char_to_word_offset[offset]
    end = char_to_word_offset[offset + len(text) - 1]
    # Only keep answers whose text can be recovered from the doc tokens; the original
    # drops the rest ("weird Unicode stuff").
    actual = " ".join(doc_tokens[start:end + 1])
    if actual.find(" ".join(text.split())) == -1:
        bad.dropped(where, f"could not find answer {text!r} in {actual!r}")
        return None
    return start, end
