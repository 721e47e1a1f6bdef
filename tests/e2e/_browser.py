"""Debian's Chromium driven by Playwright for the console's browser tests.

Playwright's own browser download is never used (no network at run time): it is pointed at the system
Chromium that `.ci/run` installs. Where that browser is absent and cannot be installed, the tests skip
and say why. Screenshots go to tests/e2e/artifacts/ (git-ignored), one per page visited.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextmanager
def chromium() -> Iterator[Any]:
    """The system Chromium under Playwright; skips (with the reason) where either is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed and could not be (apt-get install chromium); "
                    ".ci/run installs it")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists()
                                             else shutil.which("chromium"), args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / (re.sub(r"[^a-z0-9_-]+", "-", name.lower()) + ".png")
    page.screenshot(path=str(path), full_page=True)
    return path


def watch_console_errors(page: Any) -> list[str]:
    """Collects the page's script errors and CSP violations, so a test can assert none came. An answer
    with an error status (a 401 before sign-in, a 404 the test asked for) is the page working, not one."""
    errors: list[str] = []

    def logged(message: Any) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    page.on("console", logged)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors
