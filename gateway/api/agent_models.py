"""Wire models of the agent's side: harnesses and their settings (§9), prime, observe and turns (§9.1)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from gateway.api.models import PartIn, Strict
from gateway.base.limits import Attributes

MAX_EPISODES = 100
MAX_PARTS = 100


def _parts_limit(value: str | list[PartIn]) -> str | list[PartIn]:
    if isinstance(value, list) and not 1 <= len(value) <= MAX_PARTS:
        raise ValueError(f"between 1 and {MAX_PARTS} parts")
    if isinstance(value, str) and not 1 <= len(value) <= 200_000:
        raise ValueError("content is empty or too long")
    return value


class CreateHarness(Strict):
    name: str = Field(min_length=1, max_length=300)
    agent_member_id: str = Field(min_length=1, max_length=200,
                                 description="The member this harness's agent acts as.")


class HarnessSettings(Strict):
    """Only the fields given change. `default_memory_id: null` clears the default."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})
    default_memory_id: str | None = Field(default=None, min_length=1, max_length=200)
    observe: bool | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _something(self) -> HarnessSettings:
        if not self.model_fields_set:
            raise ValueError("give default_memory_id, observe, or both")
        if "observe" in self.model_fields_set and self.observe is None:
            raise ValueError("observe cannot be null")
        return self


class PrimeQuery(Strict):
    budget: int = Field(default=4000, ge=1, le=200_000, description="Tokens, estimated as utf-8 bytes / 4.")


class EpisodeIn(Strict):
    """One episode: what was said (parts with `role`), kept as the provider decides."""

    content: str | list[PartIn]
    title: str | None = Field(default=None, max_length=300)
    attributes: Attributes | None = None

    _content = field_validator("content")(_parts_limit)


class Observe(Strict):
    """`episodes`, or the shorthand of one: `content` (with `title` and `attributes`) at the top."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["episodes"]}, {"required": ["content"]}]})
    episodes: Annotated[list[EpisodeIn], Field(min_length=1, max_length=MAX_EPISODES)] | SkipJsonSchema[None] = None
    content: str | list[PartIn] | SkipJsonSchema[None] = None
    title: str | None = Field(default=None, max_length=300)
    attributes: Attributes | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, value: str | list[PartIn] | None) -> str | list[PartIn] | None:
        return None if value is None else _parts_limit(value)

    @model_validator(mode="after")
    def _one_form(self) -> Observe:
        for name in ("episodes", "content"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; leave it out")
        if (self.episodes is None) == (self.content is None):
            raise ValueError("give episodes, or content for a single episode (not both)")
        if self.episodes is not None and (self.title is not None or self.attributes is not None):
            raise ValueError("title and attributes go on each episode when episodes are given")
        return self

    def all_episodes(self) -> list[EpisodeIn]:
        if self.episodes is not None:
            return self.episodes
        return [EpisodeIn(content=self.content or "", title=self.title, attributes=self.attributes)]


class Turn(Strict):
    """A finished turn: what was asked, what was answered, which tools ran, as parts with `role`."""

    parts: list[PartIn] = Field(min_length=1, max_length=MAX_PARTS)
    title: str | None = Field(default=None, max_length=300)
    attributes: Attributes | None = None
