"""What a `written_by` may hold when it is read from outside memfed: an import file or a vendor's metadata.

memfed stamps every writer itself (§13: provenance is stamped, not supplied), so the values it writes are
always short tokens: a kind from §3's vocabulary, an id, a member type, a principal, a run id. A writer
read back from a file or a vendor is only as good as whoever last edited it, and it is shown to agents
beside every record it wrote. So one read from outside is held to the same shape memfed writes, and
refused when it is not: a newline, a sentence or a kilobyte in a writer field is never memfed's doing.

Pure: no I/O, no imports from the gateway, so the import format and every adapter check alike.
"""

from __future__ import annotations

import re
from typing import Any

from adapters.records import Writer

MAX_ID = 200
# memfed's own ids (`mbr_…`, `hcon_…`), provider names from the configuration, vendor ids (UUIDs): a
# letter or digit, then letters, digits and the punctuation ids use. No space, no line break.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+=-]{0,199}")
# §3: member and provider write records; a kind of a server's own is `x.`-prefixed.
_WRITING_KIND = re.compile(r"member|provider|x\.[a-z0-9][a-z0-9_.-]{0,62}")
_MEMBER_TYPE = re.compile(r"human|agent|x\.[a-z0-9][a-z0-9_.-]{0,62}")


class BadWriter(ValueError):
    """A writer field that memfed would never have stamped; the message names the field, not its value."""


def _token(value: Any, pattern: re.Pattern[str], field: str) -> str:
    if not isinstance(value, str):
        raise BadWriter(f"written_by.{field} must be a string")
    if not pattern.fullmatch(value):
        raise BadWriter(f"written_by.{field} is not in the form memfed stamps (a short token, at most "
                        f"{MAX_ID} characters, without spaces or line breaks)")
    return value


def _optional(value: Any, pattern: re.Pattern[str], field: str) -> str | None:
    return None if value is None else _token(value, pattern, field)


def checked_writer(kind: Any, id: Any, type: Any = None, on_behalf_of: Any = None,
                   consolidation_id: Any = None) -> Writer:
    """A Writer from values read outside memfed, or BadWriter saying which field is not one memfed writes."""
    return Writer(
        kind=_token(kind, _WRITING_KIND, "kind"),
        id=_token(id, _ID, "id"),
        type=_optional(type, _MEMBER_TYPE, "type"),
        # A principal (`member:mbr_…`) or a bare member id: both are in the id form.
        on_behalf_of=_optional(on_behalf_of, _ID, "on_behalf_of"),
        consolidation_id=_optional(consolidation_id, _ID, "consolidation_id"),
    )
