"""Output files: checked before any work, written whole or not at all.

A plan run can take minutes; an output that cannot be written should fail at
once, not after the work, and a run killed while writing must not leave half
a file where a good one was. So every writer of memplan (plans, problems,
exports, figures, HTML pages, sweep reports) goes through this module:

- `check_output`: before any work, the path is refused (`ProblemError`
  naming the option and the file) when it is a folder, its folder does not
  exist or cannot be written, or its suffix is not one the writer knows;
- `replacing`: the writer writes a temporary file in the same folder (same
  suffix, so writers that go by suffix still do), which then replaces the
  target in one `os.replace` (atomic on POSIX and Windows within one file
  system); on any error, or Ctrl-C, the temporary file is removed and the
  target is left as it was. The new file gets the mode a plain ``open``
  would have given it (or the mode of the file it replaces).

Cost: one rename per output.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from memplan.errors import ProblemError


def check_output(path: str | os.PathLike, option: str,
                 suffixes: Iterable[str] | None = None) -> None:
    """Refuse ``path`` as the output of ``option`` before any work (see the module doc);
    ``suffixes`` (``".json"``, ...), when given, are the ones the writer knows."""
    target = Path(path)
    if target.is_dir():
        raise ProblemError(f"{option}: is a folder, expected a file name", file=str(path))
    known = None if suffixes is None else tuple(s.lower() for s in suffixes)
    if known is not None and target.suffix.lower() not in known:
        what = f"unknown suffix {target.suffix!r}" if target.suffix else "no suffix"
        raise ProblemError(f"{option}: {what}; expected {', '.join(known)}", file=str(path))
    folder = target.parent
    if not folder.is_dir():
        raise ProblemError(f"{option}: the folder {str(folder)!r} does not exist",
                           file=str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ProblemError(f"{option}: the folder {str(folder)!r} is not writable",
                           file=str(path))
    if target.exists() and not os.access(target, os.W_OK):
        raise ProblemError(f"{option}: the file is not writable", file=str(path))


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; on success it replaces ``path`` at once
    (`os.replace`), on any error it is removed and ``path`` is untouched."""
    target = Path(path)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                    suffix=target.suffix)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, _mode(target))
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextmanager
def open_replacing(path: str | os.PathLike, mode: str = "w", **options) -> Iterator[IO]:
    """``open(path, mode)`` written whole or not at all: the file of `replacing`."""
    with replacing(path) as temporary, open(temporary, mode, **options) as handle:
        yield handle


def write_atomically(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """``write(temporary)``, then the temporary file replaces ``path`` (`replacing`)."""
    with replacing(path) as temporary:
        write(temporary)


def _mode(target: Path) -> int:
    """The mode of the file ``target`` replaces, else what ``open`` gives under the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
