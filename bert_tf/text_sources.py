"""Raw pretraining text: files -> documents -> sentences, streamed.

Three input formats, detected per file from its first lines (`detect_format`):

- "wiki": WikiExtractor output. Each article is `<doc id=".." url=".." title="..">`,
  its title on the first line (dropped), one paragraph per line, then `</doc>`.
  Paragraphs are split into sentences. Articles without body text are skipped.
- "gutenberg": a Project Gutenberg e-book, recognised by a `*** START OF THE/THIS PROJECT
  GUTENBERG ...` line within its first 1000 lines. Only the text between that line and
  the end marker (`*** END OF ...`, `End of Project Gutenberg's ...`, or the licence) is
  kept, less the producers' credits some books put first; hard-wrapped lines are
  joined into paragraphs (blank lines separate them) and paragraphs are split into
  sentences. The book is one document.
- "lines": the original google-research/bert input format: one sentence per line
  (taken as is, not re-split), blank lines between documents. Anything that is neither
  of the above is read this way. A line over `max_line_bytes` is no sentence (a book
  without line breaks, say): it is split into sentences, so that its text is used
  instead of one truncated instance per piece.

Sentences are split with `sentencex` (Wikimedia's rule-based segmenter, compiled, no
model files, works offline, MIT). On 1.7 MB of this corpus's Wikipedia and Gutenberg
paragraphs it split ~80 MB/s, against 15 MB/s for blingfire, 1.6 MB/s for spaCy's
sentencizer, 1.2 MB/s for syntok and 0.3 MB/s for pysbd; it agreed with pysbd on the
sentence count of 98.5% of paragraphs (blingfire and syntok: ~79%), and where they
differ it is usually right ("c. 370", "A. Horch & Cie." stay whole). Reading and
splitting all 147 MB takes ~6 s on one core.

Bad input never stops the stream; it is counted in the `stats` Counter the caller
passes in:
  documents            documents yielded (a long document's pieces count once)
  empty_documents      documents with no text (e.g. Wikipedia redirects), skipped
  sentences            sentences yielded
  invalid_utf8_lines   lines with bytes that are not UTF-8, decoded with U+FFFD
                       (which the tokenizer then deletes, as the original does)
  long_lines_split     lines over `max_line_bytes`, cut after a space into pieces (and
                       in "lines" files, split into sentences)
  gutenberg_without_end  e-books with a start marker but no end marker (kept to EOF)
Memory is bounded: a line is read `max_line_bytes` at a time and a document longer
than `max_document_sentences` is handed on in pieces that share its document index.
"""

import collections
import gzip
import html
import re
from typing import Iterator

import sentencex

MAX_LINE_BYTES = 1 << 16  # the longest line in the shared corpus is 6 KB
# A long novel has ~10k sentences; pieces of 1000 bound what a create_pretraining_data
# worker holds (no instance spans two pieces).
MAX_DOCUMENT_SENTENCES = 1000
_DETECT_LINES = 1000  # old Gutenberg headers ("the small print") run to a few hundred

_GUTENBERG_START = re.compile(r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.I)
_GUTENBERG_END = re.compile(
    r"^\s*(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG"  # the usual trailer
    r"|End of (the )?Project Gutenberg"  # "End of Project Gutenberg's ..." comes first
    r"|\*+\s*START:? ?(FULL LICENSE|\*+THE SMALL PRINT)"  # licence, no END line
    r"|The Project Gutenberg Etext of)",  # old e-texts repeat their header at the end
    re.I)
# Credits and notes that some e-books put just after the start marker.
_GUTENBERG_BOILERPLATE = re.compile(
    r"^(Produced by|E-?text prepared by|Transcribed from)|Project Gutenberg"
    r"|gutenberg\.(org|net)|ibiblio\.org", re.I)
_WIKI_DOC = re.compile(r'^<doc\s[^>]*>')
_WIKI_TITLE = re.compile(r'\stitle="([^"]*)"')

Document = tuple[int, list[str]]  # (document index within its file, sentences)


def split_sentences(text: str, language: str = "en") -> list[str]:
    """Splits a paragraph into sentences (stripped, never empty)."""
    sentences = (s.strip() for s in sentencex.segment(language, text))
    return [s for s in sentences if s]


def _cut_point(piece: bytes) -> int:
    """Where to cut an over-long line: after its last space, else before its last
    (possibly incomplete) UTF-8 character, so no word or character is split."""
    space = piece.rfind(b" ")
    if space > 0:
        return space + 1
    cut = len(piece) - 1
    while cut > 0 and piece[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        cut -= 1
    return cut or len(piece)


def _decode(raw: bytes, stats: collections.Counter) -> str:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        stats["invalid_utf8_lines"] += 1
        line = raw.decode("utf-8", errors="replace")
    return line.rstrip("\r\n").removeprefix("\ufeff")  # CRLF and the BOM of Gutenberg files


def read_lines(path: str, stats: collections.Counter, max_line_bytes: int = MAX_LINE_BYTES,
               max_bytes: int | None = None) -> Iterator[str]:
    """Decoded lines of a (possibly .gz) file without their line ends; with `max_bytes`,
    only the lines that start within its first max_bytes bytes.

    A line longer than `max_line_bytes` comes out in pieces of at most about twice that.
    """
    for text, _ in _line_pieces(path, stats, max_line_bytes, max_bytes):
        yield text


def _line_pieces(path: str, stats: collections.Counter, max_line_bytes: int,
                 max_bytes: int | None = None) -> Iterator[tuple[str, bool]]:
    """(text, continued) of `read_lines`: continued is True for every piece of a long
    line but its last (the next piece goes on where this one stops)."""
    opener = gzip.open if path.endswith(".gz") else open
    read = 0
    with opener(path, "rb") as f:
        while (max_bytes is None or read < max_bytes) and (line := f.readline(max_line_bytes)):
            read += len(line)
            if len(line) >= max_line_bytes and not line.endswith(b"\n"):
                stats["long_lines_split"] += 1
                while len(line) >= max_line_bytes and not line.endswith(b"\n"):
                    cut = _cut_point(line)
                    yield _decode(line[:cut], stats), True
                    line = line[cut:] + f.readline(max_line_bytes)
            yield _decode(line, stats), False


def detect_format(path: str) -> str:
    """"wiki", "gutenberg" or "lines" (see the module docstring), from the first lines."""
    stats = collections.Counter()  # counted again when the file is read for real
    first = None
    for n, line in enumerate(read_lines(path, stats)):
        if first is None and line.strip():
            first = line.strip()
            if _WIKI_DOC.match(first):
                return "wiki"
        if _GUTENBERG_START.match(line):
            return "gutenberg"
        if n >= _DETECT_LINES:
            break
    return "lines"


def _wiki_documents(lines: Iterator[str], language: str) -> Iterator[list[str]]:
    sentences, title, in_doc = [], None, False
    for line in lines:
        line = line.strip()
        if _WIKI_DOC.match(line):
            if in_doc:  # a missing </doc>: end the previous article here
                yield sentences
            match = _WIKI_TITLE.search(line)
            sentences, in_doc = [], True
            title = html.unescape(match.group(1)).strip() if match else None
        elif line == "</doc>":
            if in_doc:
                yield sentences
            sentences, in_doc = [], False
        elif in_doc and line:
            if title is not None and not sentences and line == title:
                continue  # WikiExtractor repeats the title as the first line
            title = None
            sentences.extend(split_sentences(line, language))
    if in_doc:
        yield sentences


def _gutenberg_documents(lines: Iterator[str], language: str,
                         stats: collections.Counter) -> Iterator[list[str]]:
    sentences, paragraph, started = [], [], False

    def end_paragraph():
        text = " ".join(paragraph)
        if text and not _GUTENBERG_BOILERPLATE.search(text):
            sentences.extend(split_sentences(text, language))
        paragraph.clear()

    for line in lines:
        if not started:
            started = bool(_GUTENBERG_START.match(line))
            continue
        if _GUTENBERG_END.match(line):
            break
        line = line.strip()
        if line:
            paragraph.append(line)
        else:
            end_paragraph()
    else:
        stats["gutenberg_without_end"] += 1
    end_paragraph()
    yield sentences


def _line_documents(pieces: Iterator[tuple[str, bool]], language: str,
                    max_line_bytes: int) -> Iterator[list[str]]:
    """A line is a sentence, a blank line ends a document; a long line (in pieces) is
    split into sentences, a sentence cut between two pieces joined again."""
    sentences, carry, in_long_line = [], "", False
    for text, continued in pieces:
        if continued or in_long_line:
            split = split_sentences(carry + text, language)
            # The last sentence of a piece may go on in the next; bounded by one piece.
            keep = continued and split and len(split[-1]) < max_line_bytes
            carry = split.pop() + " " if keep else ""
            sentences.extend(split)
            in_long_line = continued
            continue
        line = text.strip()
        if line:
            sentences.append(line)
        else:
            yield sentences
            sentences = []
    yield sentences


def read_documents(path: str, stats: collections.Counter, language: str = "en",
                   max_document_sentences: int = MAX_DOCUMENT_SENTENCES,
                   max_line_bytes: int = MAX_LINE_BYTES,
                   max_bytes: int | None = None) -> Iterator[Document]:
    """Streams the documents of one file as (document index, sentences).

    A document longer than `max_document_sentences` is yielded in consecutive pieces
    with the same index. Raises OSError if the file cannot be read.
    """
    file_format = detect_format(path)
    if file_format == "wiki":
        documents = _wiki_documents(read_lines(path, stats, max_line_bytes, max_bytes),
                                    language)
    elif file_format == "gutenberg":
        documents = _gutenberg_documents(read_lines(path, stats, max_line_bytes, max_bytes),
                                         language, stats)
    else:
        documents = _line_documents(_line_pieces(path, stats, max_line_bytes, max_bytes),
                                    language, max_line_bytes)

    index = 0
    for sentences in documents:
        if not sentences:
            # Blank-line runs in "lines" files are not documents; only count real ones.
            if file_format != "lines":
                stats["empty_documents"] += 1
            continue
        stats["documents"] += 1
        stats["sentences"] += len(sentences)
        for start in range(0, len(sentences), max_document_sentences):
            yield index, sentences[start:start + max_document_sentences]
        index += 1
