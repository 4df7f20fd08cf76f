"""How each agent CLI is pointed at ember: pure decisions, no processes, no files.

One module per client (``claude``, ``codex``, ``opencode``, ``gemini``, ``qwen``, ``aider``);
only they know that client's environment
variables, command-line switches and configuration file format. Each offers

- ``launch(...)``: the command and environment that run the client through the proxy once
  (``ember wrap``);
- ``config_path(env, home)``, ``merge(text, ...)`` and ``snippet(...)``: the lasting
  configuration and how it is merged into the client's own file (``ember setup``);
- ``mcp_merge(text, argv)`` and ``mcp_snippet(argv)``: the client starting ``ember mcp`` itself
  (``ember setup --mcp``; ``mcp.ember_argv`` decides the command line).

Starting processes, probing ports and writing files live in ``ember.launch`` and the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClientSpec:
    """What a user needs to know about an agent CLI before ember can launch it."""

    name: str  #: the word after ``ember wrap``
    title: str  #: the product's name, for messages
    binary: str  #: the executable looked up on PATH
    install: str  #: the command that installs it


@dataclass(frozen=True)
class Launch:
    """One run of a client: the full command (executable first) and its full environment."""

    argv: list[str]
    env: dict[str, str]
    #: One-line notices for the user (a setting of theirs that this run overrides, ...).
    notes: list[str] = field(default_factory=list)
    #: Files this run needs (path -> text), written before the client starts and removed after
    #: it exits: always under the scratch directory the caller named, never a file of the user's.
    files: dict[str, str] = field(default_factory=dict)


CLAUDE = ClientSpec("claude", "Claude Code", "claude", "npm install -g @anthropic-ai/claude-code")
CODEX = ClientSpec("codex", "Codex CLI", "codex", "npm install -g @openai/codex")
OPENCODE = ClientSpec("opencode", "OpenCode", "opencode", "npm install -g opencode-ai")
GEMINI = ClientSpec("gemini", "Gemini CLI", "gemini", "npm install -g @google/gemini-cli")
QWEN = ClientSpec("qwen", "Qwen Code", "qwen", "npm install -g @qwen-code/qwen-code")
AIDER = ClientSpec("aider", "aider", "aider", "python -m pip install aider-chat")
CLIENTS = {spec.name: spec for spec in (CLAUDE, CODEX, OPENCODE, GEMINI, QWEN, AIDER)}
