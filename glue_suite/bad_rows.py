"""A malformed row of a benchmark file: the error every reader raises for it, and the
`skip_bad_rows` policy (raise, or skip and count) the readers share.

Its own module because both `readers` and `squad_readers` use it and `readers`
dispatches to `squad_readers`.
"""

import logging
from typing import Union

logger = logging.getLogger(__name__)


class DataFormatError(ValueError):
    """A malformed row; the message starts with `file:line:` (or `file: question ID:`)."""

    def __init__(self, path: str, where: Union[int, str], message: str):
        self.path, self.where = path, where
        location = f"line {where}" if isinstance(where, int) else where
        super().__init__(f"{path}: {location}: {message}")


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
                self.path, where, message + " (pass skip_bad_rows=True to skip such rows)")
        self.dropped(where, message)

    def dropped(self, where: Union[int, str], message: str) -> None:
        """Counts a row that is always dropped (SQuAD answers lost to tokenization)."""
        self.count += 1
        if self.count <= 5:
            logger.warning("skipping: %s", DataFormatError(self.path, where, message))
