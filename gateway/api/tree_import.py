"""POST /v1/imports/tree: many memories and grants from one NDJSON body, all of them or none (admins).

The body is read as it streams, a line at a time, and each line is checked against the tree and the lines
before it (policies/tree_import.py): a bad line is answered at once with its status (422, or 403/404 for a
parent the caller may not create under) and `detail.line`, and nothing is written. Once every line is
checked the answer starts: NDJSON progress lines while one transaction writes the rows
(gateway/state/tree_import.py), then the report, or an error envelope when the rows refused the import at
the last moment (a parent deleted or moved meanwhile, by another instance) - in which case, too, nothing
was written. The import is never half applied.

Decisions: the administrator check, one decision per existing memory written below (`create`) or granted
on (`delete`, as POST .../grants needs), and one entry that says what the import covered.

Not behind Idempotency-Key: replaying would need the whole body kept. An import with its ids given is
safe to send again (a second run is refused, its ids being taken); one without ids creates again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.responses import StreamingResponse

from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require, require_admin
from gateway.api.tree_import_models import ImportAnswerLine, ImportGrantLine, ImportLine, ImportMemoryLine
from gateway.base import limits
from gateway.base.clock import now_ms
from gateway.base.errors import ApiError, memory_changed, memory_gone, ndjson_required, state_unavailable, translated
from gateway.base.ids import IdPool
from gateway.state.tree import MemoryNode
from gateway.state.tree_import import ImportRefused, TreePlan, write_plan
from policies import access
from policies.access import PRIVILEGES, Grant
from policies.tree_import import ImportShape, LineProblem

log = logging.getLogger("memfed.api")

MEDIA_TYPE = "application/x-ndjson"
MAX_LINE_BYTES = 64 * 1024
MAX_LINES = 5_000_000
LINES_BETWEEN_YIELDS = 200  # lines checked between two turns of the event loop: a few milliseconds
OPERATION = "memories.import_tree"
ALL_PRIVILEGES = frozenset(PRIVILEGES)
_REFUSED = {"not_found": 404, "too_deep": 422, "taken": 422, "busy": 409, "abandoned": 409}


def line_error(number: int, status: int, code: str, message: str, param: str | None = None) -> ApiError:
    return translated(status, code, f"Line {number}: {message} Nothing was imported.", param=param,
                      detail={"line": number})


class Reader:
    """Checks the lines one by one and gathers what the import will write."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.store = call.services.store
        self.shape = ImportShape(self.store.tree)
        self.plan = TreePlan(stamp=now_ms())
        self.creator = call.authenticated().member_id
        self.holder = f"member:{self.creator}"
        self.granted_on: set[str] = set()  # existing memories whose `delete` was decided
        self.holds_all: dict[str, bool] = {}  # each existing parent: does the importer hold every privilege?
        self.lines = 0
        self._strings: dict[str, str] = {}  # one object per provider name, not one per line
        self._memory_ids, self._grant_ids = IdPool("memory"), IdPool("grant")

    def take(self, number: int, raw: bytes) -> None:
        # orjson itself: a line's models are flat (a nested value anywhere is refused without recursing
        # into it), and orjson refuses lone surrogates and integers past 64 bits; limits.loads' depth walk
        # cost a fifth of the time a line takes.
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise line_error(number, 422, "memory_invalid", "not a JSON object.") from None
        if (problem := limits.plain_problem(data, raw)) is not None:
            raise line_error(number, 422, "memory_invalid", f"{problem[0] or 'the line'} {problem[1]}.", problem[0])
        if type(data) is not dict:
            raise line_error(number, 422, "memory_invalid", "not a JSON object.")
        model = ImportGrantLine if "grant" in data else ImportMemoryLine
        try:
            line: ImportGrantLine | ImportMemoryLine = model.model_validate(data, strict=True)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise line_error(number, 422, "memory_invalid", f"{where or 'the line'}: {first['msg']}.",
                             where or None) from None
        self.lines += 1
        if self.lines > MAX_LINES:
            raise line_error(number, 413, "memfed_body_too_large", f"an import holds at most {MAX_LINES} lines.")
        try:
            if isinstance(line, ImportGrantLine):
                self._grant(number, line)
            else:
                self._memory(number, line)
        except LineProblem as wrong:
            raise line_error(number, 404 if wrong.kind == "not_found" else 422,
                             "memory_not_found" if wrong.kind == "not_found" else "memory_invalid",
                             wrong.message, wrong.param) from None

    def _memory(self, number: int, line: ImportMemoryLine) -> None:
        shape, services = self.shape, self.call.services
        parent_id = shape.parent(line.parent)
        provider = line.provider
        if provider is None:
            if parent_id is None:
                provider = services.providers.default
            elif shape.is_new(parent_id):
                provider = shape.provider_of(parent_id)
            elif (parent := self.store.tree.get(parent_id)) is not None:
                provider = parent.provider
            else:  # `shape.parent` found it in this same tree with no await between: never reached
                raise line_error(number, 404, "memory_not_found", "the parent memory does not exist.", "parent")
        elif provider not in self._strings and services.providers.get(provider) is None:
            raise line_error(number, 422, "memory_invalid", f"no provider named {provider!r} is configured.",
                             "provider")
        provider = self._strings.setdefault(provider, provider)
        memory_id = line.id or self._memory_ids.take()
        if shape.place(memory_id, line.ref, parent_id, provider) and parent_id is not None:
            self._decide(number, parent_id, "create")
            held = access.effective(self.store.tree, self.call.authenticated().principals, parent_id)
            self.holds_all[parent_id] = held >= ALL_PRIVILEGES
        node = MemoryNode(memory_id, line.name, line.description, parent_id, line.restricted, provider,
                          self.creator, self.plan.stamp, self.plan.stamp)
        self.plan.nodes.append(node)
        if line.id is not None:
            self.plan.given_ids.append(memory_id)
        # The importer reaches every memory it made with all four privileges, as a single create's implicit
        # grant lets it: a grant on each root and each restricted memory (inheritance stops there), and on
        # each memory at the top of the import unless the importer holds all four on its parent already
        # (the grant would add nothing, and a million of them would slow every listing of the importer).
        top = parent_id is not None and not shape.is_new(parent_id)
        if parent_id is None or line.restricted or (top and not self.holds_all[parent_id]):
            self.plan.grants.append(Grant(self._grant_ids.take(), memory_id, self.holder, frozenset(PRIVILEGES),
                                          implicit=True))

    def _grant(self, number: int, line: ImportGrantLine) -> None:
        grant = line.grant
        memory_id, existing = self.shape.grant_target(grant.memory)
        if existing and memory_id not in self.granted_on:
            self._decide(number, memory_id, "delete")
            self.granted_on.add(memory_id)
            self.plan.grant_targets.add(memory_id)
        problem = access.principal_error(grant.principal)
        if problem:
            raise line_error(number, 422, "memory_invalid", problem + ".", "principal")
        kind, _, ident = grant.principal.partition(":")
        if (kind == "member" and self.store.member(ident) is None) or (
                kind == "group" and self.store.group(ident) is None):
            raise line_error(number, 422, "memory_invalid", f"no {kind} with id {ident!r}.", "principal")
        self.plan.grants.append(Grant(self._grant_ids.take(), memory_id, grant.principal, grant.held()))

    def _decide(self, number: int, memory_id: str, privilege: str) -> None:
        try:
            require(self.call, memory_id, privilege, OPERATION)
        except ApiError as error:
            raise line_error(number, error.status, error.code, error.message, "parent" if privilege == "create"
                             else "memory") from None

    def recheck(self) -> None:
        """Under the tree lock: the caller still holds what each existing memory needs (a grant may have
        been revoked while the body streamed)."""
        tree, principals = self.store.tree, self.call.authenticated().principals
        needs = [(m, "create") for m in self.plan.anchors] + [(m, "delete") for m in self.plan.grant_targets]
        for memory_id, privilege in needs:
            held = access.effective(tree, principals, memory_id) if tree.exists(memory_id) else frozenset()
            if privilege == "create" and self.holds_all.get(memory_id) and not held >= ALL_PRIVILEGES:
                # Its memories were planned without the importer's own grant, counting on these.
                self.call.audit(OPERATION, memory_id, "create", False, "refused: the importer's privileges here "
                                "changed while the import was read")
                raise memory_changed("The importer's privileges on a memory it writes below changed while the "
                                     "import was read; send it again.", memory_id)
            if privilege not in held:
                decision = access.explain(tree, principals, memory_id) if tree.exists(memory_id) else None
                self.call.audit(OPERATION, memory_id, privilege, False,
                                decision.reason(privilege) if decision else "refused: no such memory")
                raise memory_gone("A memory the import writes below or grants on is no longer there for this "
                                  "caller.", memory_id)


async def read_lines(call: Call, reader: Reader) -> None:
    """Feed the body to `reader` a line at a time, never holding more than one line and one chunk."""
    number, carry = 0, b""
    async for chunk in call.request.stream():
        if not chunk:
            continue
        pieces = (carry + chunk).split(b"\n")
        carry = pieces.pop()
        for piece in pieces:
            number += 1
            if len(piece) > MAX_LINE_BYTES:
                raise line_error(number, 413, "memfed_body_too_large", f"a line is at most {MAX_LINE_BYTES} bytes.")
            if piece.strip():
                reader.take(number, piece)
            if number % LINES_BETWEEN_YIELDS == 0:
                # A chunk of the body may hold thousands of lines (the server gathers what arrived while
                # the last one was read): checked in one go they held the loop for a third of a second.
                await asyncio.sleep(0)
        if len(carry) > MAX_LINE_BYTES:
            raise line_error(number + 1, 413, "memfed_body_too_large", f"a line is at most {MAX_LINE_BYTES} bytes.")
    if len(carry) > MAX_LINE_BYTES:
        raise line_error(number + 1, 413, "memfed_body_too_large", f"a line is at most {MAX_LINE_BYTES} bytes.")
    if carry.strip():
        reader.take(number + 1, carry)


class _CollectorPause:
    """The cyclic garbage collector paused while imports run, then what they left frozen out of its way.

    An import allocates a node and its fields a memory, none of them ever part of a cycle. With the
    collector on, each full collection walks every object made so far: at a million memories it ran many
    times, each a stall of the event loop growing with the import. `memfed serve` freezes its loaded heap
    for the same reason (gateway/server/app.py); the import's nodes join it once written."""

    def __init__(self) -> None:
        self.running = 0
        self.was_enabled = True

    def __enter__(self) -> None:
        if self.running == 0:
            self.was_enabled = gc.isenabled()
            gc.disable()
        self.running += 1

    def __exit__(self, *exc: object) -> None:
        self.running -= 1
        if self.running == 0 and self.was_enabled:
            if gc.get_freeze_count():  # the app froze its heap at start: keep what the tree now holds there
                gc.freeze()
            gc.enable()


_collector = _CollectorPause()


async def import_tree(call: Call) -> StreamingResponse:
    require_admin(call, OPERATION)
    media = call.request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != MEDIA_TYPE:
        raise ndjson_required(MEDIA_TYPE, media[:100])
    reader = Reader(call)
    with _collector:
        await read_lines(call, reader)
    plan, shape = reader.plan, reader.shape
    plan.anchors = shape.levels_below()
    call.audit(OPERATION, None, "create", True,
               f"allowed: administrator importing {len(plan.nodes)} memories ({shape.roots} roots, the rest "
               f"below {len(plan.anchors)} existing memories decided above) and {len(plan.grants)} grants")
    summary = {"object": "memory.tree_import", "memories": len(plan.nodes), "grants": len(plan.grants),
               "roots": shape.roots, "under": sorted(plan.anchors), "lines": reader.lines}
    reader.shape = ImportShape(call.services.store.tree)  # what placed the lines is not needed any more
    return StreamingResponse(_written(call, reader, summary), media_type=MEDIA_TYPE)


async def _written(call: Call, reader: Reader, summary: dict[str, Any]) -> AsyncIterator[bytes]:
    with _collector:
        async for line in _progress(call, reader, summary):
            yield line


async def _progress(call: Call, reader: Reader, summary: dict[str, Any]) -> AsyncIterator[bytes]:
    plan = reader.plan
    yield _line({"object": "memory.tree_import.progress", "phase": "checked", "done": summary["lines"],
                 "total": summary["lines"]})
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    task = asyncio.get_running_loop().create_task(
        write_plan(call.services.store, plan, lambda done, total: queue.put_nowait((done, total)), reader.recheck))
    try:
        while not (task.done() and queue.empty()):
            waiting = asyncio.ensure_future(queue.get())
            await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                continue
            done, total = waiting.result()
            yield _line({"object": "memory.tree_import.progress", "phase": "writing", "done": done, "total": total})
        try:
            task.result()
        except ImportRefused as refused:
            status = _REFUSED[refused.kind]
            code = {404: "memory_not_found", 409: "memory_busy"}.get(status, "memory_invalid")
            error = translated(status, code, refused.message + " Nothing was imported.", param="memory_id",
                               detail={"memory_id": refused.memory_id, "status": status})
            yield _line(error.envelope())
            return
        except ApiError as error:
            yield _line({"error": {**error.envelope()["error"], "detail": {**(error.detail or {}),
                                                                           "status": error.status}}})
            return
        except Exception:
            # The status is sent already: the last line says what happened, never a stream just cut off.
            log.exception("tree import failed")
            said = ("It was committed: the change log brings it into every instance from its next request."
                    if plan.committed else "It was rolled back: nothing was imported.")
            failure = state_unavailable(f"The state store failed during the import. {said}",
                                        {"status": 503, "committed": plan.committed})
            yield _line(failure.envelope())
            return
        yield _line(summary)
    finally:
        if not task.done():  # the client went away: roll back unless the commit is under way
            task.cancel()
            while not task.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([task])


def _line(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document) + b"\n"


ENDPOINTS = [
    Endpoint("POST", "/v1/imports/tree", import_tree,
             "Create many memories and grants from NDJSON, all or none; answers NDJSON progress, then the "
             "report (admins).", OPERATION, raw_body=MEDIA_TYPE, raw_line=ImportLine, media=MEDIA_TYPE,
             response=ImportAnswerLine, errors=(403, 404, 409, 413, 415, 422), tags=("memories",)),
]
