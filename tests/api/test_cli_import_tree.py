"""`memfed import-tree FILE --url --key-env`: streams the file to the gateway and shows its progress."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pytest

from gateway.cli import main
from gateway.cli.import_tree import import_tree
from tests.api._gateway import Gateway


def tree_file(tmp_path: Path, parent: str, count: int) -> Path:
    path = tmp_path / "tree.ndjson"
    lines = [{"ref": "top", "name": "Top", "parent": parent}]
    lines += [{"ref": f"c{i}", "name": f"Customer {i}", "parent": "top"} for i in range(count)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_the_cli_imports_a_file_with_progress_bars_on_stderr(gateway: Gateway, tmp_path: Path) -> None:
    """The bytes sent and the rows written each get a bar on standard error that reaches 100%; the report
    is printed on standard output; the memories are in the tree."""
    company = await gateway.root("Company")
    path = tree_file(tmp_path, company["id"], 2500)
    err, out = io.StringIO(), io.StringIO()
    code = await import_tree(str(path), "http://memfed", gateway.admin_key, err, out,
                             transport=httpx.ASGITransport(app=gateway.app))
    assert code == 0, err.getvalue()
    shown = err.getvalue()
    assert "sending" in shown and "writing" in shown
    assert "100%" in shown.split("writing")[-1]
    assert "imported 2501 memories" in shown
    assert gateway.admin_key not in shown + out.getvalue()
    report = json.loads(out.getvalue())
    assert report["memories"] == 2501 and report["under"] == [company["id"]]
    assert len(gateway.services.store.tree) == 1 + 2501


async def test_the_cli_says_which_line_was_refused_and_exits_1(gateway: Gateway, tmp_path: Path) -> None:
    """A bad line: the gateway's message (with the line number) on standard error, status 1, nothing written."""
    company = await gateway.root("Company")
    path = tree_file(tmp_path, company["id"], 3)
    path.write_text(path.read_text() + '{"name": "orphan", "parent": "nowhere"}\n')
    err, out = io.StringIO(), io.StringIO()
    code = await import_tree(str(path), "http://memfed", gateway.admin_key, err, out,
                             transport=httpx.ASGITransport(app=gateway.app))
    assert code == 1
    assert "import refused (404)" in err.getvalue() and "Line 5" in err.getvalue()
    assert out.getvalue() == ""
    assert len(gateway.services.store.tree) == 1


def test_the_cli_wants_the_key_in_the_named_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Without the variable set, it says which one to set and sends nothing."""
    monkeypatch.delenv("MEMFED_TEST_NO_KEY", raising=False)
    path = tmp_path / "t.ndjson"
    path.write_text('{"name": "A"}\n')
    assert main(["import-tree", str(path), "--key-env", "MEMFED_TEST_NO_KEY"]) == 2
    assert "MEMFED_TEST_NO_KEY" in capsys.readouterr().err
