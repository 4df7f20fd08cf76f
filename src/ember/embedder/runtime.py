"""Run the embedder: tokenizers for word pieces, onnxruntime for the graph. No torch.

``load_onnx_embedder`` turns a checkpoint's files into an ``OnnxEmbedder`` (the graph from the
disk cache or built from the safetensors weights, an onnxruntime session, the tokenizer);
``OnnxEmbedder.embed`` is the hot path. Loading failures are ``EmbedderUnavailable``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort  # type: ignore[import-untyped]
from tokenizers import Tokenizer

from ember.embedder.batching import plan_batches
from ember.embedder.checkpoint import read_spec
from ember.embedder.compiled import GraphKind, Weights, build_model, compiled_model, discard
from ember.embedder.errors import EmbedderUnavailable
from ember.embedder.exitguard import native_work
from ember.embedder.files import ModelFiles
from ember.embedder.prune import prune
from ember.embedder.spec import ATTENTION_MASK, INPUT_IDS, OUTPUT, ModelSpec

log = logging.getLogger(__name__)

Optimization = Literal["basic", "extended", "all"]
_LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@dataclass(frozen=True)
class Tuning:
    """onnxruntime knobs. The defaults won ``bench/embed_throughput.py`` on a 2-core machine.

    ``weights`` ``int8`` (``quantize.py``): a short ask costs ~3.6 ms of CPU and 2.3-2.5 ms
    of wall time instead of ~6.0 and 3.5-3.7 (float32, both on two threads, back to back), at
    equal recall@10 on every test set of ``bench/memory_quality.py``.

    ``threads`` is capped at 2 even on bigger machines: the embedder shares the host with the
    agents it serves, and a short query gains little past two threads. One thread won a
    microbenchmark of asks 50 ms apart (5.33 against 5.67 ms p50, ``--sections spaced``) but
    lost in the proxy itself: +0.53 ms on a new ask's added latency (``bench/memory_ask.py``,
    paired median) for 5% less CPU, so two it stays. ``parallel_texts``: a bulk call (import,
    a shadow's facts) embeds that many texts at once, each in its own call, so a text still
    gets the same bytes as when it is asked alone: 400-450 texts/s against ~340 one by one.

    ``spinning`` off matters on a small machine shared with the proxy: spinning intra-op
    threads keep a core busy for a while after every call, stealing it from requests.
    """

    threads: int = field(default_factory=lambda: min(2, os.cpu_count() or 1))
    parallel_texts: int = field(default_factory=lambda: min(2, os.cpu_count() or 1))
    optimization: Optimization = "all"
    spinning: bool = False
    fused_attention: bool = True
    weights: Weights = "int8"
    max_batch: int = 32
    max_tokens: int = 8192

    @property
    def graph(self) -> GraphKind:
        return GraphKind(self.fused_attention, self.weights)

    @property
    def one_at_a_time(self) -> bool:
        """Embed each text alone: with 8-bit weights a row's vector moves (3rd decimal) with
        the other rows of its batch, and a fact must get the same bytes whether it is stored
        in a batch or asked alone. Alone costs bulk import nothing measurable (~360 short
        texts/s against ~340 for float32 in batches of 32, ``bench/embed_throughput.py``)."""
        return self.weights == "int8"


class OnnxEmbedder:
    """An ``Embedder`` backed by one onnxruntime session; safe to call from several threads.

    Rows are unit length and in input order. A text longer than the model's window is cut at
    ``max_seq_length`` word pieces (256 for all-MiniLM-L6-v2, as sentence-transformers does);
    the empty string (and whitespace) embeds as the model's vector for ``[CLS] [SEP]``, a
    valid unit vector, exactly as the reference implementation returns it. Once the process
    has begun to exit, ``embed`` raises ``EmbedderUnavailable`` instead of starting onnxruntime.
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        tokenizer: Tokenizer,
        *,
        name: str,
        dim: int,
        tuning: Tuning,
    ) -> None:
        self.name = name
        self.dim = dim
        self._session = session
        self._tokenizer = tokenizer
        self._tuning = tuning
        self._pool_lock = threading.Lock()
        self._texts_pool: ThreadPoolExecutor | None = None

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; wrap a single text: embed([text])")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"embed() texts[{i}] is {type(text).__name__}, not str")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with native_work():  # may run on a daemon thread: never across interpreter exit
            self._run(texts, out)
        return out

    def _run(self, texts: Sequence[str], out: npt.NDArray[np.float32]) -> None:
        # sentence-transformers strips each text before tokenising; keep the same input.
        encodings = self._tokenizer.encode_batch([t.strip() for t in texts])
        lengths = [len(e.ids) for e in encodings]
        per_call = 1 if self._tuning.one_at_a_time else self._tuning.max_batch
        batches = plan_batches(lengths, per_call, self._tuning.max_tokens)

        def run(batch: list[int]) -> None:
            width = max(lengths[i] for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : lengths[i]] = encodings[i].ids
                mask[row, : lengths[i]] = 1
            (vectors,) = self._session.run([OUTPUT], {INPUT_IDS: ids, ATTENTION_MASK: mask})
            out[batch] = vectors

        pool = self._pool() if len(batches) > 1 else None
        if pool is None:
            for batch in batches:
                run(batch)
            return
        futures = [pool.submit(run, batch) for batch in batches]
        wait(futures)  # every call done before ``native_work`` ends, even when one failed
        for future in futures:
            future.result()

    def _pool(self) -> ThreadPoolExecutor | None:
        """The threads a bulk call's texts run on side by side; None when calls run one
        after the other (a batching graph, or ``parallel_texts`` 1). Made on first use:
        a proxy that only ever embeds asks never starts them."""
        width = self._tuning.parallel_texts
        if width <= 1 or not self._tuning.one_at_a_time:
            return None
        with self._pool_lock:
            if self._texts_pool is None:
                self._texts_pool = ThreadPoolExecutor(width, thread_name_prefix="ember-embed")
            return self._texts_pool


def _session_options(tuning: Tuning) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = _LEVELS[tuning.optimization]
    opts.intra_op_num_threads = tuning.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3  # onnxruntime's warnings go to stderr, not through logging
    if not tuning.spinning:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


def load_tokenizer(path: Path, spec: ModelSpec) -> Tokenizer:
    """The checkpoint's tokenizer, truncating at ``max_seq_length`` and padding nothing.

    all-MiniLM-L6-v2's ``tokenizer.json`` carries "truncate and pad to 128"; both are replaced:
    the window is the model's 256 and padding is done per batch by ``OnnxEmbedder``.
    """
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise EmbedderUnavailable(f"cannot read tokenizer {path}: {exc}") from exc
    tok.no_padding()
    tok.enable_truncation(max_length=spec.max_seq_length)
    if tok.get_vocab_size() > spec.vocab:
        raise EmbedderUnavailable(
            f"tokenizer {path} has {tok.get_vocab_size()} word pieces but the model only "
            f"{spec.vocab}: the files belong to different models"
        )
    return tok


def _session(model: str | bytes, tuning: Tuning, name: str) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(
            model, _session_options(tuning), providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise EmbedderUnavailable(f"onnxruntime rejected the graph for {name}: {exc}") from exc


def _open_session(
    files: ModelFiles, spec: ModelSpec, tuning: Tuning, name: str, cache_dir: Path | None
) -> ort.InferenceSession:
    """From the disk cache when there is one (see ``compiled``), else built in memory.

    The cache is an optimisation, never a reason to fail: an unwritable directory or an entry
    onnxruntime refuses is logged and the graph is built in memory for this run.
    """
    if cache_dir is not None:
        model = name.removeprefix("onnx:")
        try:
            path = compiled_model(files, spec, cache_dir, tuning.graph, model)
        except OSError as exc:
            log.warning(
                "cannot cache the embedder graph in %s (%s); building it in memory", cache_dir, exc
            )
        else:
            try:
                session = _session(str(path), tuning, name)
            except EmbedderUnavailable as exc:
                log.warning("discarding the cached embedder graph %s: %s", path, exc)
                discard(path)
            else:
                prune(cache_dir, keep=path.parent.name)
                return session
    built = build_model(files, spec, tuning.graph)
    return _session(built.SerializeToString(), tuning, name)


def load_onnx_embedder(
    files: ModelFiles,
    name: str,
    tuning: Tuning | None = None,
    cache_dir: Path | None = None,
) -> OnnxEmbedder:
    """Open ``files`` as an embedder; raises ``EmbedderUnavailable``.

    ``cache_dir`` (normally the per-user models cache) keeps the built graph on disk: pass it
    in long-running processes, where it saves ~180 MB of RSS and most of the load time. Raises
    ``EmbedderUnavailable`` too when the process is already exiting (see ``exitguard``).
    """
    tuning = tuning or Tuning()
    started = time.perf_counter()
    # The whole load, not only the session: it runs on the loader's daemon thread, and an exit
    # that lets it finish also leaves a complete cache entry instead of a stray build.
    with native_work():
        spec = read_spec(files)
        tokenizer = load_tokenizer(files.tokenizer, spec)
        session = _open_session(files, spec, tuning, name, cache_dir)
    log.info(
        "embedder %s loaded from %s in %.2fs", name, files.source, time.perf_counter() - started
    )
    return OnnxEmbedder(session, tokenizer, name=name, dim=spec.hidden, tuning=tuning)
