"""An observed episode, and the payload the outbox keeps it as until its provider has it.

The payload is decoded into the record the provider is sent: an episode record whose write id, and
whose `x.memfed.outbox_id` attribute, is the outbox row's id, so a send that may have landed is found
again before it is repeated (gateway/agent/outbox.py says why).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.base import NewRecord, Part, Writer, part_from_json, part_to_json

OUTBOX_ATTRIBUTE = "x.memfed.outbox_id"
EPISODE = "episode"


@dataclass(frozen=True)
class Episode:
    content: tuple[Part, ...]
    written_by: Writer
    written_at: datetime
    title: str | None = None
    attributes: dict[str, Any] | None = None


def encode(episode: Episode) -> str:
    writer = episode.written_by
    return json.dumps({
        "content": [part_to_json(p) for p in episode.content],
        "written_by": {"kind": writer.kind, "id": writer.id, "type": writer.type,
                       "on_behalf_of": writer.on_behalf_of},
        "written_at": episode.written_at.isoformat(),
        "title": episode.title,
        "attributes": episode.attributes or {},
    })


def decode(payload: str, outbox_id: str) -> NewRecord:
    data = json.loads(payload)
    return NewRecord(
        type=EPISODE,
        content=tuple(part_from_json(p) for p in data["content"]),
        written_by=Writer(**data["written_by"]),
        written_at=datetime.fromisoformat(data["written_at"]),
        title=data.get("title"),
        attributes={**data.get("attributes", {}), OUTBOX_ATTRIBUTE: outbox_id},
        write_id=outbox_id,
    )
