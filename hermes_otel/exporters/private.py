"""Where we write telemetry files, only if it is ours: the directory and the file must belong to this user, and
neither may be a symbolic link. Files may hold conversation content; appending to a file (or into a directory)
that another user owns or planted would hand them that content.

A directory of ours that others can read or write is tightened to 0700 and a loose file of ours to 0600, as
before. Anything else is refused with :class:`UnsafePath`, said once per directory, and no file is written.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from .._internal import log as _log
from ..config.files import not_ours as _whose

DIR_MODE = 0o700
FILE_MODE = 0o600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafePath(PermissionError):
    """A directory or file we refuse to write to; the message says why and what to do."""


FILES_HINT = "set file.directory to a directory of your own; see `hermes-otel config keys`"


def _refuse(directory: Path, why: str, hint: str = FILES_HINT) -> UnsafePath:
    message = f"hermes-otel: not writing telemetry files to {directory}: {why}; no files are written there ({hint})"
    _log.once(f"unsafe-path:{directory}", "%s", message, level=logging.WARNING, per_process=True)
    return UnsafePath(message)


def ensure_dir(directory: Path, hint: str = FILES_HINT) -> None:
    """Create `directory` (0700), or check and tighten an existing one; raises UnsafePath when it is not ours
    (`hint` says what to do instead)."""
    directory = Path(directory)
    try:
        st = os.lstat(directory)
    except (FileNotFoundError, NotADirectoryError):
        os.makedirs(directory, mode=DIR_MODE, exist_ok=True)  # an I/O failure stays an OSError: the writer reports it
        st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(directory, f"it is a symbolic link (to {os.readlink(directory)}), not followed", hint)
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(directory, "it is not a directory", hint)
    whose = _whose(st)
    if whose:
        raise _refuse(directory, "it is " + whose, hint)
    # Tighten a directory we own that others can read, but never a shared sticky one such as /tmp.
    if stat.S_IMODE(st.st_mode) & 0o077 and not st.st_mode & stat.S_ISVTX:
        os.chmod(directory, stat.S_IMODE(st.st_mode) & DIR_MODE)


def open_file(path: Path, flags: int, siblings: tuple[str, ...] = ()) -> tuple[int, os.stat_result]:
    """Open (creating, 0600) a file of ours in a directory of ours; never through a symbolic link. A planted
    `siblings` file (one another user owns, a link) refuses the whole directory: no file of ours is written there."""
    path = Path(path)
    ensure_dir(path.parent)
    # the file itself checked before the open too: O_TRUNC must not touch someone else's file
    why = _names_problem(path.parent, (*(name for name in siblings if name != path.name), path.name))
    if why:
        raise _refuse(path.parent, why)
    try:
        fd = os.open(path, flags | _NOFOLLOW, FILE_MODE)
    except OSError:
        if os.path.islink(path):
            raise _refuse(path.parent, f"{path.name} is a symbolic link; hermes-otel does not follow it") from None
        raise
    try:
        st = os.fstat(fd)
        whose = _whose(st)
        if whose or not stat.S_ISREG(st.st_mode):
            raise _refuse(path.parent, f"{path.name} is " + (whose or "not a regular file"))
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)  # a file of ours left behind with a looser mode
            st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def problem(directory: Path, names: tuple[str, ...] = ()) -> str | None:
    """What :func:`ensure_dir` / :func:`open_file` would refuse, found without changing anything (for `doctor`)."""
    directory = Path(directory)
    try:
        st = os.lstat(directory)
    except (FileNotFoundError, NotADirectoryError):
        existing = next((p for p in directory.parents if os.path.lexists(p)), None)
        if existing is not None and not existing.is_dir():
            return f"cannot be created: {existing} is not a directory"
        if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
            return f"cannot be created: {existing} is not writable"
        return None
    except OSError as exc:
        return f"cannot be inspected ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"is a symbolic link (to {os.readlink(directory)}); hermes-otel does not follow it"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if owner := _whose(st):
        return "is " + owner
    if not os.access(directory, os.W_OK | os.X_OK):
        return "is not writable"
    return _names_problem(directory, names)


def _names_problem(directory: Path, names: tuple[str, ...]) -> str | None:
    """What is wrong with the files `names` in `directory` (a link, not a regular file, another user's)."""
    for name in names:
        try:
            fst = os.lstat(directory / name)
        except OSError:
            continue
        if stat.S_ISLNK(fst.st_mode):
            return f"{name} is a symbolic link; hermes-otel does not follow it"
        if not stat.S_ISREG(fst.st_mode) or _whose(fst):
            return f"{name} is " + (_whose(fst) or "not a regular file")
    return None
