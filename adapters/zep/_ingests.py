"""v4 ingestion tasks that outlive the process that started them.

Zep answers an episode's add with the task that processes it; whether Zep is still deriving from the
episode is one poll of that task. The episode's own `processed` flag is no substitute: an ingestion Zep
gave up on leaves it false for good, so a reader who lost the task would wait forever. The task of each
episode is therefore kept in the adapter's data dir (`zep-ingests.json`), beside the graph ids, so a
restart or another gateway process on the same data dir polls the same task. A task that succeeded is
dropped (the episode's flag now says `processed: true`); one that failed or ended partial is kept with its
outcome, since the flag would keep saying false. The file is bounded (`LIMIT` records, oldest dropped): a
record dropped from it is judged by the episode's flag, as one no task was ever known for. Each write
merges what other processes wrote since (the window between that read and the rename may still lose
one of theirs, which then falls back to the flag).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LIMIT = 10_000


class Ingests:
    """record id -> (task uuid, how it ended or None while it may run), in memory and in the data dir."""

    def __init__(self, data_dir: Path | None) -> None:
        self._file = data_dir / "zep-ingests.json" if data_dir is not None else None
        self._known: dict[str, tuple[str, str | None]] = {}
        self._read()

    def _read(self, dropped: str | None = None) -> None:
        """Merge the file into what this process knows (its own entries win), leaving out `dropped`."""
        if self._file is None or not self._file.exists():
            return
        try:
            raw = json.loads(self._file.read_text())
        except (OSError, ValueError):
            return  # a torn or foreign file: every episode falls back to its own flag
        if isinstance(raw, dict):
            for record_id, entry in raw.items():
                if record_id != dropped and isinstance(entry, list) and len(entry) == 2 and \
                        isinstance(entry[0], str) and (entry[1] is None or isinstance(entry[1], str)):
                    self._known.setdefault(record_id, (entry[0], entry[1]))

    def _keep(self, dropped: str | None = None) -> None:
        self._read(dropped)  # what another process on the data dir wrote since
        while len(self._known) > LIMIT:
            del self._known[next(iter(self._known))]
        if self._file is None:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        scratch = self._file.with_suffix(f".{os.getpid()}.tmp")  # processes sharing the dir never share one
        scratch.write_text(json.dumps({r: list(e) for r, e in self._known.items()}))
        os.chmod(scratch, 0o600)
        scratch.replace(self._file)

    def get(self, record_id: str) -> tuple[str, str | None] | None:
        """The record's task and its end, read again from the data dir when this process has not seen it
        (another process may have written the episode)."""
        if record_id not in self._known:
            self._read()
        return self._known.get(record_id)

    def started(self, record_id: str, task_uuid: str) -> None:
        self._known[record_id] = (task_uuid, None)
        self._keep()

    def ended(self, record_id: str, task_uuid: str, status: str) -> None:
        if status == "succeeded":
            self._known.pop(record_id, None)
            self._keep(dropped=record_id)
        else:
            self._known[record_id] = (task_uuid, status)
            self._keep()
