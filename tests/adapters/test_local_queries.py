"""Named and free SQL queries on the local provider: the container a statement cannot leave (§6.5).

Each escape below is tried against a provider whose file holds two memories; the statement is run for
M1. Every attempt is refused or answers with nothing of M2, and afterwards the provider's file holds
exactly what it held before and no file was added next to it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ProviderRejected, Record, Reference, Unsupported
from adapters.local import LocalProvider, queries
from adapters.local._query_container import RECORD_COLUMNS, SCHEMA_TEXT
from adapters.queries import QueryParamError, QueryResult
from tests.adapters.harnesses import M1, M2, PERSON, Stamps

SECRET = "Zebra-7 launch codes"


@dataclass
class Two:
    """A provider holding M1 (three records, one referring to another and one to M2) and M2 (a secret)."""

    local: LocalProvider
    path: Path
    mine: list[Record]
    theirs: Record

    def dump(self) -> list[str]:
        """Everything in the provider's file, read through a separate read-only connection."""
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            return list(db.iterdump())
        finally:
            db.close()

    def files(self) -> list[str]:
        return sorted(p.name for p in self.path.parent.rglob("*") if not p.name.endswith(("-wal", "-shm")))

    async def free(self, statement: str, **params: object) -> QueryResult:
        return await self.local.run_free(M1, "sql", statement, params, max_rows=200, max_seconds=0.5)


@pytest.fixture
async def two(tmp_path: Path, stamps: Stamps) -> AsyncIterator[Two]:
    path = tmp_path / "store" / "records.sqlite3"
    local = await LocalProvider.open(path)
    try:
        theirs = await local.remember(M2, stamps.record(SECRET, type="fact", attributes={"account": "zebra"}))
        acme = await local.remember(M1, stamps.record("Acme renews in March.", type="fact",
                                                      title="Acme renewal", attributes={"account": "acme", "n": 3}))
        dana = await local.remember(M1, stamps.record("Dana leads procurement.", type="entity", title="Dana"))
        linked = await local.remember(M1, stamps.record(
            "Dana asked about the renewal.", attributes={"account": "acme"},
            references=(Reference(M1, dana.id, "subject"), Reference(M2, theirs.id, "mentions"))))
        yield Two(local, path, [acme, dana, linked], theirs)
    finally:
        await local.close()


def nothing_of_m2(two: Two, result: QueryResult) -> None:
    seen = repr(result)
    assert SECRET not in seen and "Zebra" not in seen and two.theirs.id not in seen and M2 not in seen


# --------------------------------------------------------------------------- escapes that are refused

REFUSED = [
    # the provider's own tables, by every spelling
    "SELECT * FROM versions",
    "SELECT * FROM main.versions",
    "SELECT * FROM versions_fts WHERE versions_fts MATCH 'zebra'",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_schema",
    "SELECT name FROM main.sqlite_master",
    'SELECT * FROM "SQLITE_MASTER"',
    "SELECT * FROM [sqlite_master]",
    "sElEcT * FrOm SqLiTe_ScHeMa",
    "SELECT count(*) FROM sqlite_master",
    "SELECT 1 FROM sqlite_temp_master",
    "SELECT * FROM temp.sqlite_master",
    "SELECT (SELECT sql FROM sqlite_master LIMIT 1)",
    "SELECT * FROM records WHERE id IN (SELECT name FROM sqlite_master)",
    "SELECT * FROM json_each((SELECT group_concat(sql) FROM sqlite_master))",
    "SELECT * FROM \uff53\uff51\uff4c\uff49\uff54\uff45_master",  # fullwidth letters
    'SELECT * FROM "sqlite_master\u200b"',
    "SELECT * FROM dbstat",
    "SELECT count(*) FROM dbstat",
    "SELECT * FROM sqlite_stmt",
    "SELECT * FROM pragma_table_info('records')",
    "SELECT * FROM pragma_database_list",
    "SELECT count(*) FROM pragma_database_list",
    # other databases and files
    "ATTACH DATABASE '{path}' AS real",
    "ATTACH '{path}' AS real; SELECT * FROM real.versions",
    "SELECT * FROM real.versions",
    "ATTACH 'file:{path}?mode=ro' AS real",
    "VACUUM INTO '{dir}/copy.sqlite3'",
    "VACUUM",
    "SELECT load_extension('{dir}/evil.so')",
    "SELECT fts3_tokenizer('simple')",
    # pragmas
    "PRAGMA table_info(records)",
    "PRAGMA database_list",
    "PRAGMA query_only = OFF",
    "PRAGMA writable_schema = ON",
    # writes, schema changes, transactions
    "INSERT INTO records (id, type, text, content, attributes, version, written_at, written_by)"
    " VALUES ('x', 'fact', 'x', '[]', '{{}}', 1, 'now', 'member:x')",
    "UPDATE records SET title = 'hijacked'",
    "DELETE FROM records",
    "DROP TABLE records",
    "CREATE TABLE t (x)",
    "CREATE TEMP TABLE t (x)",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE VIRTUAL TABLE t USING fts5(x)",
    "CREATE TEMP TRIGGER t AFTER INSERT ON records BEGIN SELECT 1; END",
    "ALTER TABLE records ADD COLUMN x",
    "WITH x AS (SELECT 1) DELETE FROM records",
    "WITH x AS (SELECT 1) INSERT INTO refs SELECT 'a', 'b', 'c'",
    "REINDEX",
    "ANALYZE",
    "BEGIN",
    "COMMIT",
    "SAVEPOINT a",
    "EXPLAIN SELECT 1",
    "EXPLAIN QUERY PLAN SELECT * FROM records",
    # a second statement, however it is hidden
    "SELECT 1; DROP TABLE records",
    "SELECT 1 -- a comment\n; DELETE FROM records",
    "SELECT 1 /* ; */; ATTACH '{path}' AS real",
    "SELECT 1;;",
    "SELECT 1\x00; DROP TABLE records",
    "  /* lead */ -- line\n DELETE FROM records",
    # functions that say something about the process, the connection or make memory
    "SELECT sqlite_version()",
    "SELECT changes(), last_insert_rowid()",
    "SELECT randomblob(1000000000)",
    "SELECT zeroblob(1000000000)",
    "SELECT length(printf('%.*c', 1000000000, 'x'))",
    "SELECT format('%2000000000d', 1)",
    "SELECT json_patch('{{}}', '{{}}')",
    "SELECT text FROM records WHERE text LIKE '%' || '{long}' || '%'",
    "SELECT text FROM records WHERE text GLOB '*{long}*'",
    "SELECT ?",
    "SELECT ?1",
]


@pytest.mark.parametrize("statement", REFUSED)
async def test_an_escape_is_refused_and_changes_nothing(two: Two, statement: str) -> None:
    """Reading the provider's tables or SQLite's own, attaching a file, a pragma, a write, a schema
    change, a hidden second statement, an unlisted function or a memory bomb: refused, and afterwards
    the provider's file is as it was and no file was created."""
    statement = statement.format(path=two.path, dir=two.path.parent, long="a" * 101)
    before, files = two.dump(), two.files()

    with pytest.raises(ProviderRejected):
        await two.free(statement)

    assert two.dump() == before
    assert two.files() == files
    assert (await two.local.get(M2, two.theirs.id)).content == two.theirs.content


@pytest.mark.parametrize("statement", [s for s in REFUSED if "{" not in s])
async def test_checking_refuses_what_running_refuses(two: Two, statement: str) -> None:
    """A named query's body is checked when it is defined, by the same walls as a run."""
    with pytest.raises(ProviderRejected):
        await two.local.check_query("sql", statement)


# --------------------------------------------------------------------------- reaches that find nothing


async def test_another_memorys_record_is_not_in_the_container(two: Two) -> None:
    """By id, by words, by attribute or by a parameter: a record of M2 is simply not there."""
    for result in (
        await two.free("SELECT * FROM records WHERE id = :id", id=two.theirs.id),
        await two.free("SELECT * FROM records WHERE text LIKE '%Zebra%' OR attributes ->> 'account' = 'zebra'"),
        await two.free("SELECT id, text FROM records"),
        await two.free("SELECT group_concat(text, ' | ') AS everything FROM records"),
        await two.local.run_named(M1, "sql", "SELECT * FROM records WHERE id IN (SELECT value FROM json_each(:ids))",
                                  {"ids": [two.theirs.id, two.mine[0].id]}),
    ):
        nothing_of_m2(two, result)
    counted = await two.free("SELECT count(*) AS n FROM records")
    assert counted.rows == ((3,),)


async def test_a_reference_into_another_memory_is_not_copied(two: Two) -> None:
    """refs holds references between M1's own records only: M2's id and its record's id stay out."""
    _, dana, linked = two.mine
    result = await two.free("SELECT record_id, target_id, rel FROM refs")
    assert result.rows == ((linked.id, dana.id, "subject"),)
    nothing_of_m2(two, result)


async def test_forged_rows_with_record_columns_are_rows_not_records(two: Two) -> None:
    """A statement that makes up a row with every column of records and another memory's id gets back
    the row it wrote, never that record: records are only those in the container."""
    forged = ", ".join(f"'{two.theirs.id}' AS id" if c == "id" else f"NULL AS {c}" for c in RECORD_COLUMNS)
    result = await two.free(f"SELECT {forged}")
    assert result.records is None
    assert result.rows == ((two.theirs.id, *([None] * (len(RECORD_COLUMNS) - 1))),)
    assert SECRET not in repr(result)


async def test_forgotten_records_and_old_versions_are_not_in_the_container(two: Two, stamps: Stamps) -> None:
    """The container holds what `list` shows: current versions of active records."""
    acme, dana, linked = two.mine
    await two.local.revise(M1, acme.id, stamps.revision(title="Acme renewal (moved to April)"))
    await two.local.forget(M1, dana.id, PERSON, stamps.tick())
    result = await two.free("SELECT id, title, version FROM records ORDER BY id")
    assert sorted(result.rows) == sorted([(acme.id, "Acme renewal (moved to April)", 2), (linked.id, None, 1)])


async def test_counting_a_cte_is_allowed_unless_it_wears_a_system_name(two: Two) -> None:
    """count(*) of a CTE the statement defined counts it; one named like SQLite's own tables is refused
    (SQLite reports both alike, so the name decides, on the side of refusing)."""
    result = await two.free("WITH c(x) AS (VALUES (1), (2)) SELECT count(*) FROM c")
    assert result.rows == ((2,),)
    with pytest.raises(ProviderRejected):
        await two.free("WITH sqlite_master(x) AS (VALUES (1), (2)) SELECT count(*) FROM sqlite_master")


async def test_the_columns_carry_what_the_api_shows(two: Two, stamps: Stamps) -> None:
    """text joins the words of every part in order; instants are ISO 8601 UTC to the millisecond;
    written_by is the writer's principal; attributes and content are JSON."""
    from adapters.base import Part

    written = await two.local.remember(M1, stamps.record(content=(
        Part(type="text", text="first", role="user"), Part(type="x.chart", extra={"n": 1}),
        Part(type="text", text="second")), attributes={"k": [1, 2]}))
    result = await two.free("SELECT text, written_at, written_by, writer_type, attributes ->> '$.k[1]', "
                            "json_array_length(content), content ->> '$[0].role' FROM records WHERE id = :id",
                            id=written.id)
    assert result.rows == (("first\nsecond", "2026-10-01T09:00:05.000Z", "member:mbr_agent", "agent", 2, 3, "user"),)


async def test_a_memory_beyond_the_copy_limit_is_capped_and_says_so(two: Two) -> None:
    """Only the newest query_max_records records are copied; degraded says the memory was capped."""
    two.local.query_max_records = 2
    result = await two.free("SELECT id FROM records ORDER BY written_at")
    assert result.rows == ((two.mine[1].id,), (two.mine[2].id,))
    assert result.degraded == ("query:memory_capped_at_2_records",)


# --------------------------------------------------------------------------- bounds


# `big` is one string of 2^21 characters (2 MiB), made without printf.
BIG = ("WITH RECURSIVE d(s) AS (SELECT 'a' UNION ALL SELECT s || s FROM d WHERE length(s) < 2097152),"
       " big(s) AS MATERIALIZED (SELECT s FROM d ORDER BY length(s) DESC LIMIT 1) ")
BOMBS = [
    "WITH RECURSIVE c(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM c) SELECT length(s) AS n FROM c",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT length(group_concat(x)) AS n FROM c",
    BIG + ", c(x) AS (SELECT s FROM big UNION SELECT x || 'y' FROM c) SELECT count(*) AS n FROM c",
    BIG + "SELECT length(replace(s, 'a', 'aaa')) AS n FROM big",
    BIG + "SELECT length(s || s || s) AS n FROM big",
    BIG + "SELECT length(group_concat(s)) AS n FROM big, (VALUES (1), (2), (3))",
    BIG + "SELECT length(quote(s || s)) AS n FROM big",
]
# Functions that SQLite computes in time proportional to the product of their arguments' lengths,
# given 2 MiB arguments: each answers at once (replaced by linear ones) and correctly.
QUADRATIC = [
    (BIG + "SELECT instr(s, substr(s, 1, length(s) / 2) || 'b') AS n FROM big", 0),
    (BIG + "SELECT length(replace(s, substr(s, 1, length(s) / 2) || 'b', '')) AS n FROM big", 2**21),
    (BIG + "SELECT length(trim(s, replace(substr(s, 1, 1000000), 'a', 'c') || 'a')) AS n FROM big", 0),
    (BIG + ", cs(c) AS (SELECT group_concat(char(x), '') FROM (WITH RECURSIVE k(x) AS (SELECT 256 UNION ALL "
           "SELECT x + 1 FROM k WHERE x < 20000) SELECT x FROM k)) SELECT length(ltrim(s, c || 'a')) AS n FROM big, cs",
     0),
    (BIG + "SELECT length(rtrim(s || 'b', 'b')) AS n FROM big", 2**21),
]


@pytest.mark.parametrize("statement", BOMBS)
async def test_a_memory_bomb_is_defused(two: Two, statement: str) -> None:
    """A value longer than the container's limit (4 MiB) is never made: SQLite answers NULL for it or
    refuses the statement, and a growth that stays under it runs into the time budget or the byte cap."""
    try:
        result = await two.free(statement)
    except ProviderRejected as refused:
        assert "too big" in str(refused)
        return
    values = [v for row in result.rows for v in row]
    assert all(v is None or v <= 4 * 1024 * 1024 for v in values)
    assert result.degraded or all(v is None for v in values)


@pytest.mark.parametrize(("statement", "expected"), QUADRATIC)
async def test_quadratic_functions_are_linear_here(two: Two, statement: str, expected: int) -> None:
    """instr, replace and the two-argument trims on 2 MiB arguments finish inside the budget with
    SQLite's answer (SQLite's own take minutes on these: one function call cannot be interrupted)."""
    result = await two.local.run_free(M1, "sql", statement, {}, max_seconds=30.0)
    assert result.rows == ((expected,),) and result.degraded == ()


def test_the_linear_functions_agree_with_sqlite() -> None:
    """On ordinary arguments the replacements answer what SQLite's own functions answer."""
    from adapters.local._query_container import open_container

    plain = sqlite3.connect(":memory:")
    sealed = open_container((), ())
    cases = [
        "instr('banana', 'an')", "instr('banana', 'x')", "instr('banana', '')", "instr(NULL, 'a')",
        "instr('ab', NULL)", "instr(12345, 34)", "instr(x'616263', x'63')",
        "replace('banana', 'an', 'AN')", "replace('banana', '', 'x')", "replace('aaa', 'a', '')",
        "replace(NULL, 'a', 'b')", "replace('a', NULL, 'b')", "replace('a', 'a', NULL)", "replace(12321, 2, 'x')",
        "trim('xxhixx', 'x')", "ltrim('xxhixx', 'x')", "rtrim('xxhixx', 'x')", "trim('abcba', 'ab')",
        "trim('  hi  ')", "ltrim('  hi')", "rtrim('hi  ')", "trim(NULL, 'x')", "trim('x', NULL)", "trim('', 'x')",
        "trim('héllo', 'hé')",
    ]
    try:
        for case in cases:
            assert sealed.execute(f"SELECT {case}").fetchall() == plain.execute(f"SELECT {case}").fetchall(), case
    finally:
        plain.close()
        sealed.close()


async def test_a_query_that_never_ends_is_stopped_and_says_so(two: Two) -> None:
    """An endless recursive CTE is interrupted at the time budget; degraded names the bound."""
    before = two.dump()
    result = await two.local.run_free(
        M1, "sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", {},
        max_seconds=0.2,
    )
    assert result.rows == () and result.degraded == ("query:time_limit_0.2s",)
    assert two.dump() == before


async def test_a_huge_result_is_capped_and_says_so(two: Two) -> None:
    """An endless stream of rows stops at max_rows; degraded names the cap."""
    result = await two.local.run_free(
        M1, "sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c", {},
        max_rows=50,
    )
    assert result.rows == tuple((i,) for i in range(1, 51))
    assert result.degraded == ("query:rows_capped_at_50",)


async def test_a_result_too_large_in_bytes_is_capped_and_says_so(two: Two) -> None:
    """Rows of large values stop at the byte cap, below the row cap; degraded names it."""
    # A time budget far beyond the statement's own time: the byte cap is what stops it, on a loaded machine too.
    result = await two.local.run_free(
        M1, "sql",
        BIG + ", c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT substr((SELECT s FROM big), 1, 1000000) || x"
        " FROM c", {}, max_rows=200, max_seconds=30.0,
    )
    assert 1 <= len(result.rows) < 200
    assert result.degraded == ("query:bytes_capped_at_4194304",)


async def test_the_provider_answers_other_calls_while_a_query_runs(two: Two) -> None:
    """The statement runs on a thread of its own, off the provider's lock: a get completes while an
    endless query is still running."""
    running = asyncio.create_task(two.local.run_free(
        M1, "sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", {},
        max_seconds=3.0,
    ))
    await asyncio.sleep(0)
    assert (await two.local.get(M1, two.mine[0].id)).id == two.mine[0].id
    assert not running.done()
    assert (await running).degraded == ("query:time_limit_3s",)


# --------------------------------------------------------------------------- what a query can do


async def test_select_star_from_records_answers_records(two: Two) -> None:
    """A result with exactly the columns of records answers the records themselves, in row order."""
    acme, _, linked = two.mine
    result = await two.free("SELECT r.* FROM records r WHERE json_extract(attributes, '$.account') = :a"
                            " ORDER BY written_at", a="acme")
    assert result.is_records and result.records == (acme, linked)
    assert result.rows == ()


async def test_any_other_result_answers_rows(two: Two) -> None:
    """Chosen columns, joins and aggregates answer columns and rows of JSON scalars."""
    acme = two.mine[0]
    joined = await two.free("SELECT r.title AS holder, t.title AS subject FROM refs JOIN records r ON r.id = "
                            "refs.record_id JOIN records t ON t.id = refs.target_id")
    assert joined.columns == ("holder", "subject") and joined.rows == ((None, "Dana"),)
    by_type = await two.free("SELECT type, count(*) AS n FROM records GROUP BY type ORDER BY type")
    assert by_type.rows == (("entity", 1), ("fact", 1), ("note", 1))
    odd = await two.free("SELECT x'00ff' AS blob, 1e999 AS big, attributes ->> 'n' AS n FROM records WHERE "
                         "id = :id", id=acme.id)
    assert odd.rows == (("AP8=", "inf", 3),)


async def test_params_bind_json_values(two: Two) -> None:
    """A string, a number, null and a list (as JSON text, for json_each) bind as SQL values."""
    acme, dana, _ = two.mine
    result = await two.free(
        "SELECT id FROM records WHERE id IN (SELECT value FROM json_each(:ids)) AND (:type IS NULL OR type = :type)"
        " AND version >= :v ORDER BY id", ids=[acme.id, dana.id], type=None, v=1)
    assert result.rows == tuple(sorted(((acme.id,), (dana.id,))))


async def test_a_missing_or_unbindable_param_is_named(two: Two) -> None:
    """A parameter the statement uses and the caller did not give, or a value SQLite cannot hold, is
    refused naming the parameter."""
    with pytest.raises(QueryParamError) as missing:
        await two.free("SELECT * FROM records WHERE id = :wanted")
    assert missing.value.param == "wanted"
    with pytest.raises(QueryParamError) as huge:
        await two.free("SELECT :n", n=2**70)
    assert huge.value.param == "n"


async def test_check_lists_the_parameters_without_running(two: Two) -> None:
    """check_query compiles on an empty container and names every parameter, in order of first use,
    whatever its prefix; an endless statement is not run."""
    found = await two.local.check_query("sql", "SELECT * FROM records WHERE type = :type AND id = $id OR "
                                               "title = @type")
    assert found.parameters == ("type", "id")
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    assert (await two.local.check_query("sql", endless)).parameters == ()


async def test_another_language_is_unsupported(two: Two) -> None:
    """Local speaks only sql."""
    with pytest.raises(Unsupported):
        await two.local.run_free(M1, "cypher", "MATCH (n) RETURN n", {})
    with pytest.raises(Unsupported):
        await two.local.check_query("cypher", "MATCH (n) RETURN n")


def test_the_schema_an_agent_is_shown_is_the_container_schema() -> None:
    """query_schema describes exactly the columns a statement sees."""
    for column in RECORD_COLUMNS:
        assert f"\n    {column} " in SCHEMA_TEXT
    assert "CREATE TABLE refs" in SCHEMA_TEXT


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
async def test_a_members_statement_runs_at_the_lowest_cpu_priority(two: Two, monkeypatch: pytest.MonkeyPatch) -> None:
    """A free statement (which may spin for its whole budget) runs on a thread at nice 19, so it only
    takes CPU the event loop and the provider's threads leave; the loop's own thread keeps its priority."""
    seen: list[int] = []
    real = queries.run

    def observed(*args: Any, **kwargs: Any) -> QueryResult:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(*args, **kwargs)

    monkeypatch.setattr(queries, "run", observed)
    result = await two.local.run_free(M1, "sql", "SELECT count(*) AS n FROM records", {})
    assert result.rows and seen == [19]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < 19
