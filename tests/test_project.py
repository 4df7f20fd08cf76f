from __future__ import annotations

from pathlib import Path

from ember.project import cwd_from_text, project_dir_name, resolve_project


def test_header_project_id_wins_over_everything() -> None:
    ref = resolve_project(
        {"x-ember-project-id": "acme", "x-ember-cwd": "/x"}, "/root", "Working directory: /sys"
    )
    assert ref is not None and (ref.identity, ref.source) == ("acme", "header:x-ember-project-id")


def test_order_cwd_header_then_root_then_system_then_messages() -> None:
    assert resolve_project({"x-ember-cwd": "/a/b/"}).identity == "/a/b"  # type: ignore[union-attr]
    assert resolve_project({}, "/r", "Working directory: /s").source == "project-root"  # type: ignore[union-attr]
    ref = resolve_project({}, None, "<env>\nWorking directory: /home/u/app\n</env>", ["x"])
    assert ref is not None and (ref.identity, ref.source) == ("/home/u/app", "system-prompt")
    reminder = "<system-reminder>\nWorking directory: /srv/api\n</system-reminder>"
    ref = resolve_project({}, None, "You are Claude Code.", ["hello", reminder])
    assert ref is not None and (ref.identity, ref.source) == ("/srv/api", "messages")


def test_codex_environment_context() -> None:
    assert cwd_from_text("<environment_context>\n  <cwd>/tmp/large</cwd>\n") == "/tmp/large"


def test_unresolved_is_none() -> None:
    assert resolve_project({}, None, "You are helpful.", ["hi"]) is None
    assert cwd_from_text("Working directory: relative/path") is None


def test_same_basename_different_projects_never_share_a_directory(tmp_path: Path) -> None:
    a = project_dir_name("/home/u/acme/api", is_path=True)
    b = project_dir_name("/home/u/other/api", is_path=True)
    assert a != b and a.startswith("api-") and b.startswith("api-")
    c = project_dir_name("acme/api", is_path=False)
    d = project_dir_name("acme api", is_path=False)
    assert c != d and c.startswith("acme-api-") and d.startswith("acme-api-")
    assert len(a.rsplit("-", 1)[1]) == 16


def test_db_path_layout(tmp_path: Path) -> None:
    ref = resolve_project({"x-ember-cwd": "/w/My Project!"})
    assert ref is not None
    path = ref.db_path(tmp_path)
    assert path.parent.parent == tmp_path / "projects"
    assert path.parent.name.startswith("My-Project-") and path.name == "ember.db"


def test_a_remembered_system_prompt_never_names_another_prompts_project() -> None:
    """The system prompt's directory is remembered by the prompt's whole text: prompts alike
    but for their working directory keep resolving to their own projects, in any order."""
    prompt = "You are an agent.\n" + "Be careful. " * 2000 + "\nWorking directory: {}\n"
    for _ in range(2):
        for where in ("/work/a", "/work/b", "/work/a"):
            ref = resolve_project({}, None, prompt.format(where))
            assert ref is not None and ref.identity == where


def test_qwen_codes_first_message_names_its_directory() -> None:
    first = (
        "This is the Qwen Code. We are setting up the context for our chat.\n"
        "My operating system is: linux\n"
        "I'm currently working in the directory: /work/proj\n"
        "Here is the folder structure of the current working directories:\n"
    )
    ref = resolve_project({}, None, "You are Qwen Code.", [first, "say hi"])
    assert ref is not None and (ref.identity, ref.source) == ("/work/proj", "messages")
    assert cwd_from_text("Tell me why I'm currently working in the directory: /etc") is None


def test_gemini_clis_session_context_names_the_first_workspace_directory() -> None:
    first = (
        "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
        "The project's temporary directory is: /home/user/.gemini/tmp/proj\n"
        "- **Workspace Directories:**\n  - /work/proj\n  - /work/shared\n"
        "- **Directory Structure:**\n\n/work/proj/\n\u251c\u2500\u2500\u2500a.py\n"
        "</session_context>"
    )
    ref = resolve_project({}, None, "You are Gemini CLI.", [first, "say hi"])
    assert ref is not None and (ref.identity, ref.source) == ("/work/proj", "messages")
    windows = "- **Workspace Directories:**\r\n  - C:\\Users\\dev\\proj\r\n"
    assert cwd_from_text(windows) == "C:/Users/dev/proj"
    assert cwd_from_text("the workspace directories: are listed below") is None


def test_opencodes_env_block_names_its_directory() -> None:
    system = "<env>\n  Working directory: /work/proj\n  Workspace root folder: /\n</env>"
    assert cwd_from_text(system) == "/work/proj"
