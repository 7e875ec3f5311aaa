"""A malformed row of a benchmark file: the error every reader raises for it, the
`skip_bad_rows` policy (raise, or skip and count) the readers share, and how a line that
is not UTF-8 is told apart (read with errors="surrogateescape", each bad byte becomes one
lone surrogate, so one bad line spoils neither the file nor its neighbours).

Its own module because both `readers` and `squad_readers` use it and `readers`
dispatches to `squad_readers`.
"""

import logging
import re
from typing import Optional, Union

from bert_tf.cli import InputError

logger = logging.getLogger(__name__)


class DataFormatError(InputError):
    """A malformed row: `DataFormatError(path, line or e.g. "question 'q7'", message)`,
    printed `file:line: message`."""


class BadRows:
    """Raises on a malformed row, or counts it when skipping is allowed.

    Args:
        path: the file (or source name) quoted in errors.
        skip: skip and count malformed rows instead of raising.
    """

    def __init__(self, path: str, skip: bool):
        self.path, self.skip, self.count = path, skip, 0

    def __call__(self, where: Union[int, str], message: str) -> None:
        if not self.skip:
            raise DataFormatError(
                self.path, where, message + " (--skip_bad_rows skips such rows)")
        self.dropped(where, message)

    def dropped(self, where: Union[int, str], message: str) -> None:
        """Counts a row that is always dropped (SQuAD answers lost to tokenization)."""
        self.count += 1
        if self.count <= 5:
            logger.warning("skipping: %s", DataFormatError(self.path, where, message))


_SURROGATE = re.compile("[\udc80-\udcff]")  # a byte that surrogateescape could not decode


def not_utf8(text: str) -> Optional[str]:
    """What is wrong with a line read with errors="surrogateescape", or None if nothing."""
    match = _SURROGATE.search(text)
    if match is None:
        return None
    return (f"not valid UTF-8: byte 0x{ord(match.group()) - 0xDC00:02x} at column "
            f"{match.start() + 1}")


def decode_utf8(path: str, raw: bytes) -> str:
    """A whole file's bytes as text, a leading BOM dropped; DataFormatError at the line
    of the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataFormatError(path, line, f"not valid UTF-8: byte 0x{raw[e.start]:02x}") from None
