"""The store with an embedder that is not ready, fails, or changes model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ember.embedder.errors import EmbedderNotReady
from ember.memory import HierarchicalMemory
from tests.memory.conftest import HashEmbedder, OpenStore, RawSql


class Loading:
    """A factory that raises until ``ready`` is set, like the proxy's background loader."""

    def __init__(self) -> None:
        self.ready = False
        self.embedder = HashEmbedder()

    def __call__(self) -> HashEmbedder:
        if not self.ready:
            raise EmbedderNotReady("still loading")
        return self.embedder


def test_facts_added_before_the_model_loads_are_found_and_embedded_later(
    open_store: OpenStore,
) -> None:
    source = Loading()
    store = open_store(embedder=source)
    m = store.add("The queue is RabbitMQ")
    assert store.embedder_error is not None and store.index_name is None
    hits = store.search("RabbitMQ queue")
    assert [h.memory.id for h in hits] == [m.id]
    assert hits[0].similarity == 0.0  # keyword-only: the injection floor will keep it out
    source.ready = True
    hits = store.search("which queue is RabbitMQ")
    assert [h.memory.id for h in hits] == [m.id] and hits[0].similarity > 0.3
    assert RawSql(store).execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0] == 1


def test_delete_never_loads_the_model(open_store: OpenStore) -> None:
    first = open_store("p")
    m = first.add("to be removed")
    first.close()
    source = Loading()
    store = open_store("p", embedder=source)
    assert store.delete(m.id) == [m.id]
    conn = RawSql(store)
    assert conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0] == 0
    if store.index_name == "sqlite-vec":
        assert conn.execute("SELECT COUNT(*) FROM memory_vec").fetchone()[0] == 0


class OtherModel(HashEmbedder):
    name = "test:other"
    dim = 256

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return super().embed(texts)[:, :256] / np.float32(1.0)


def test_a_new_embedder_re_embeds_instead_of_mixing_vectors(open_store: OpenStore) -> None:
    first = open_store("p")
    m = first.add("Logs go to Loki")
    first.close()
    store: HierarchicalMemory = open_store("p", embedder=OtherModel())
    hits = store.search("where do logs go")
    assert [h.memory.id for h in hits] == [m.id]
    blob = RawSql(store).execute("SELECT vector FROM memory_vectors").fetchone()[0]
    assert len(blob) == 256 * 4
