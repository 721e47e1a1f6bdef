"""Which file parts an embedded provider keeps: its declared media types, with `type/*` wildcards.

Shared by the SQLite provider (adapters/local/) and the PostgreSQL one (adapters/postgres/), which both
keep files by reference and refuse a medium they do not declare rather than store it unsearched.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.base import Part, ProviderRejected, Unsupported


def refuse_unkept_media(content: Sequence[Part], kept_media: Sequence[str]) -> None:
    for part in content:
        if part.type != "file":
            continue
        if part.file is None:
            raise ProviderRejected("a file part must name its file")
        media = part.file.media_type.split(";")[0].strip().lower()
        if not any(media_matches(media, kept) for kept in kept_media):
            raise Unsupported(f"this memory does not keep {media} files")


def media_matches(media: str, kept: str) -> bool:
    major, _, minor = kept.partition("/")
    got_major, _, got_minor = media.partition("/")
    return got_major == major and minor in ("*", got_minor)
