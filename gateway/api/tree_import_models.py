"""The lines of a bulk tree import (POST /v1/imports/tree) and of its answer, for validation and /openapi.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel, model_validator

from gateway.api.models import PRINCIPAL_PATTERN, Name, Privilege, Strict
from gateway.api.responses import Open

# A memory id a line chooses travels in paths: plain URL-safe characters, as long as the column holds.
ID_PATTERN = r"^[A-Za-z0-9_-]+$"


class ImportMemoryLine(Strict):
    """One memory. `parent` names an earlier line (its `ref`, then its `id`) or an existing memory; none
    makes a root (the importer is an administrator). `provider` defaults to the parent's."""

    id: str | None = Field(default=None, min_length=1, max_length=64, pattern=ID_PATTERN,
                           description="The memory's id; one is minted when not given.")
    ref: str | None = Field(default=None, min_length=1, max_length=200,
                            description="A label later lines name this memory by (this file only).")
    name: str = Name
    parent: str | None = Field(default=None, min_length=1, max_length=200)
    description: str = Field(default="", max_length=4000)
    restricted: bool = False
    provider: str | None = Field(default=None, min_length=1, max_length=100)


class ImportGrant(Strict):
    memory: str = Field(min_length=1, max_length=200, description="An earlier line's ref or id, or a memory.")
    principal: str = Field(min_length=3, max_length=200, pattern=PRINCIPAL_PATTERN)
    privileges: list[Privilege] | None = Field(default=None, min_length=1, max_length=4)
    privilege: Privilege | None = Field(default=None, description="One privilege, instead of `privileges`.")

    @model_validator(mode="after")
    def _one_form(self) -> ImportGrant:
        if (self.privileges is None) == (self.privilege is None):
            raise ValueError("give exactly one of privileges and privilege")
        return self

    def held(self) -> frozenset[str]:
        if self.privileges is not None:
            return frozenset(self.privileges)
        return frozenset([self.privilege]) if self.privilege is not None else frozenset()


class ImportGrantLine(Strict):
    grant: ImportGrant


class ImportLine(RootModel[ImportMemoryLine | ImportGrantLine]):
    """A line of the request body: a memory, or `{"grant": {...}}`."""


class ImportProgressOut(Open):
    object: Literal["memory.tree_import.progress"]
    phase: Literal["checked", "writing"]
    done: int = Field(ge=0)
    total: int = Field(ge=0)


class ImportTreeOut(Open):
    """The last line of a committed import (a failed one ends with an error envelope instead, whose
    `detail.status` is the status the failure would have had, and nothing is written)."""

    object: Literal["memory.tree_import"]
    memories: int = Field(ge=0)
    grants: int = Field(ge=0, description="Every grant written: the lines' and the importer's own (one on each "
                        "memory at the top of the import and on each restricted one).")
    roots: int = Field(ge=0)
    under: list[str] = Field(description="The existing memories the import wrote below.")
    lines: int = Field(ge=0)


class ImportAnswerLine(RootModel[ImportProgressOut | ImportTreeOut | dict[str, Any]]):
    """A line of the answer: progress, then the import's report or an error envelope."""
