"""Reading the files configuration points at (`plugins.toml`, header files) without hanging or bloating.

Only regular files are read, up to a size cap, and the open never blocks: a FIFO, a device
(`/dev/zero`), a socket or a directory gets a one-line reason instead of a hang or a MemoryError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_CONFIG_BYTES = 1024 * 1024  # a plugins.toml
MAX_HEADER_FILE_BYTES = 64 * 1024  # one header value

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class Unreadable(Exception):
    """Why a file was not read, in words fit for a problem report (never its content)."""


class Untrusted(Unreadable):
    """A file someone else could have written: a configuration that may name where secrets go."""


TRUSTED = "a file only this user can change (owned by this user, not writable by others)"


def not_ours(st: os.stat_result) -> str | None:
    """None when `st` belongs to this user (or the platform has no uids), else whose it is."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    return None if uid is None or st.st_uid == uid else f"owned by uid {st.st_uid}, not by this user (uid {uid})"


def untrusted(st: os.stat_result) -> str | None:
    """None when only this user can change the file, else why not."""
    if owner := not_ours(st):
        return owner
    if st.st_mode & stat.S_IWOTH:
        return f"writable by others (mode {st.st_mode & 0o777:o})"
    return None


def read_regular(path: Path, cap: int, *, trusted: bool = False, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most `cap` bytes, else :class:`Unreadable`; with `trusted`, only a file
    no other user can change (:class:`Untrusted`): a configuration decides where credentials are sent; without
    `follow`, a symbolic link (the last component) is not followed."""
    flags = _FLAGS if follow else _FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    except FileNotFoundError:
        raise Unreadable("no such file") from None
    except OSError as exc:
        raise Unreadable(_reason(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(not_regular(st.st_mode))
        why = untrusted(st) if trusted else None
        if why:
            raise Untrusted(why)
        if st.st_size > cap:
            raise Unreadable(f"{st.st_size} bytes, more than the {size_text(cap)} allowed")
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, cap + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:  # grew while we read
            raise Unreadable(f"more than the {size_text(cap)} allowed")
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(_reason(exc)) from None
    finally:
        os.close(fd)


def not_regular(mode: int) -> str:
    """What a file that is not a regular one is, in words: "a FIFO, not a regular file"."""
    if stat.S_ISLNK(mode):
        return "a symbolic link, not followed"
    kind = next((name for test, name in _KINDS if test(mode)), None)
    return f"{kind}, not a regular file" if kind else "not a regular file"


def _reason(exc: OSError) -> str:
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def size_text(n: int) -> str:
    """1 MiB, 64 KiB, 100 bytes."""
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"
