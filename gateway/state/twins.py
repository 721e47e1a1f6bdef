"""Frozen values built without their frozen `__init__`, for the load's hot loops.

A frozen dataclass sets each field through `object.__setattr__` (its own `__setattr__` refuses): about
0.7 µs for a node of nine fields, most of a second of a million-memory load, and as much again for the
grants. Its thawed twin, a plain slots dataclass with the same fields in the same order, sets them with
ordinary slot stores (about 0.1 µs); assigning `__class__` then makes the object an instance of the frozen
class, which Python allows between two classes of one memory layout. From then on it is a frozen instance
like any other (the same equality, hash and refusal to change), of the same size.

The twin is checked when it is made: a layout the assignment refuses, or a field that does not land
where the frozen class reads it, fails at import, never silently in a load.
"""

from __future__ import annotations

from dataclasses import fields, make_dataclass
from typing import Any


def thawed_twin(frozen: type[Any]) -> type[Any]:
    """A mutable slots dataclass with the fields of the frozen slots dataclass `frozen`. Build with
    `made = Twin(...)` then `made.__class__ = frozen` (two statements inline: a helper call would cost what
    the twin saves)."""
    names = [field.name for field in fields(frozen)]
    twin = make_dataclass(
        f"Thawed{frozen.__name__}", [(field.name, field.type) for field in fields(frozen)], slots=True
    )
    probe = twin(*(f"probe {name}" for name in names))
    probe.__class__ = frozen  # TypeError here when the layouts differ
    if type(probe) is not frozen or [getattr(probe, name) for name in names] != [f"probe {n}" for n in names]:
        raise TypeError(f"{twin.__name__} does not build {frozen.__name__}")
    return twin
