"""One grammar for `degraded` entries (adapters/degraded.py), and every entry the code builds follows it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.degraded import Entry, NotAnEntry, entry, memory_entry, parse, provider_entry, record_entry, token

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("adapters", "gateway", "policies")
# Where a list of degraded entries is built under another name before it is answered as `degraded`.
OTHER_SINKS = {("gateway/api/types.py", "failed"), ("policies/capabilities.py", "out"),
               ("policies/capabilities.py", "notes")}
_BUILTINS = {"tuple", "list", "sorted", "set"}


@pytest.mark.parametrize(("text", "parts"), [
    ("text:not_supported", Entry("text", "not_supported")),
    ("subtree:capped_at_200_memories", Entry("subtree", "capped_at_200_memories")),
    ("provider:m0:timeout", Entry(None, "timeout", "provider", "m0")),
    ("provider:mem0-cloud:as_of:not_supported", Entry("as_of", "not_supported", "provider", "mem0-cloud")),
    ("provider:local:query:emulated", Entry("query", "emulated", "provider", "local")),
    ("memory:hmem_0a1b:records:timeout", Entry("records", "timeout", "memory", "hmem_0a1b")),
    ("query:time_limit_0.5s", Entry("query", "time_limit_0.5s")),
])
def test_the_grammar_reads_each_kind_of_entry(text: str, parts: Entry) -> None:
    """A plain entry is subject:condition; a scoped one names its provider, memory or record first and
    may leave the subject out (the provider as a whole)."""
    assert parse(text) == parts


@pytest.mark.parametrize("text", [
    "text:not_supported:provider:m0",  # the old signal form: the scope goes first
    "records:some were erased since",  # words are tokens
    "hmem_1:memory_unavailable: timeout",
    "timeout",  # a bare condition only inside a scope
    "provider:m0",
    "provider:a:b:c:d",
    "Text:not_supported",
    "",
])
def test_the_grammar_refuses_what_is_not_an_entry(text: str) -> None:
    """Each of the shapes the gateway used to emit beside the grammar is refused by it."""
    with pytest.raises(NotAnEntry):
        parse(text)


def test_builders_emit_only_entries_and_refuse_a_name_with_a_colon() -> None:
    """The builders give the grammar's strings; a provider name that would break it is refused (config
    refuses such names before they get here); a free word becomes a token; a record id that is no name is
    `unnamed`."""
    assert provider_entry("m0", entry("as_of", "not_supported")) == "provider:m0:as_of:not_supported"
    assert memory_entry("hmem_1", "records", token("no answer")) == "memory:hmem_1:records:no_answer"
    assert record_entry("weird id/1", "reference", "kept_old_id") == "record:unnamed:reference:kept_old_id"
    with pytest.raises(NotAnEntry):
        provider_entry("a:b", "timeout")


# --------------------------------------------------------------------------- every entry the code builds


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def _is_sink(node: ast.expr, path: str) -> bool:
    text = ast.unparse(node)
    return "degraded" in text.rsplit(".", 1)[-1] or any(p == path and text == name for p, name in OTHER_SINKS)


def _leaves(node: ast.expr) -> Iterator[ast.expr]:
    """The strings an expression put into a degraded collection can be: through tuples, lists,
    conditionals, comprehensions and concatenations; calls (the builders) and names are not followed."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _leaves(element.value if isinstance(element, ast.Starred) else element)
    elif isinstance(node, ast.IfExp):
        yield from _leaves(node.body)
        yield from _leaves(node.orelse)
    elif isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp):
        yield from _leaves(node.elt)
    elif isinstance(node, ast.BinOp):
        yield from _leaves(node.left)
        yield from _leaves(node.right)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILTINS:
        for argument in node.args:
            yield from _leaves(argument)
    elif isinstance(node, ast.Constant | ast.JoinedStr):
        yield node


def _rendered(node: ast.expr) -> str | None:
    """A constant as it is; an f-string with each replacement field as `1` (a valid token and name)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    assert isinstance(node, ast.JoinedStr)
    return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "1" for v in node.values)


def _built() -> Iterator[tuple[str, int, str]]:
    """(file, line, the string) of every literal or f-string the code puts into `degraded`."""
    for path, module in _sources():
        for node in ast.walk(module):
            values: list[ast.expr] = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("append", "extend") and _is_sink(node.func.value, path):
                    values = list(node.args)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
                values = [node.value] if _is_sink(node.target, path) else []
            elif isinstance(node, ast.Assign):
                values = [node.value] if any(_is_sink(t, path) for t in node.targets) else []
            elif isinstance(node, ast.keyword) and node.arg == "degraded":
                values = [node.value]
            elif isinstance(node, ast.Dict):
                values = [v for k, v in zip(node.keys, node.values, strict=True)
                          if isinstance(k, ast.Constant) and k.value == "degraded"]
            for value in values:
                for leaf in _leaves(value):
                    text = _rendered(leaf)
                    if text:
                        yield path, leaf.lineno, text


def test_every_degraded_string_the_code_builds_follows_the_grammar() -> None:
    """Every literal and f-string the code puts into a `degraded` collection (in adapters, policies and
    the gateway) parses, once scoped as the gateway scopes an adapter's entries; the rest are built by
    adapters/degraded.py, whose builders check what they build."""
    found = list(_built())
    seen = {(path, text) for path, _, text in found}
    # The scan reaches the adapters' own entries, in a list built by hand and in a comprehension.
    assert ("adapters/mem0/_recall.py", "pool_limited") in seen
    assert ("adapters/plugin/_reads.py", "1:not_supported") in seen
    assert ("adapters/local/queries.py", "query:time_limit_1s") in seen
    wrong = []
    for path, line, text in found:
        scoped = f"provider:p:{text}" if path.startswith("adapters/") and not text.startswith("provider:") else text
        try:
            parse(scoped)
        except NotAnEntry:
            wrong.append(f"{path}:{line}: {text!r}")
    assert wrong == []
