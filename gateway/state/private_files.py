"""Files and directories only the gateway's user may read: state, records, files, the decision journal.

Modes are set explicitly rather than left to the umask, which under the common 022 makes new files
world-readable. Directories that exist already are left as the operator made them.
"""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create `path` and any missing parents with mode 0700 (mkdir -p would give parents the umask's)."""
    missing: list[Path] = []
    at = path
    while not at.exists():
        missing.append(at)
        at = at.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs to have set
        os.chmod(directory, 0o700)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 if it does not exist (SQLite then gives its -wal and -shm files
    the same mode)."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return path
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, atomically, with mode 0600."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_new_private(path: Path, data: bytes) -> None:
    """Write `data` to the new file `path` (which must not exist) with mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
