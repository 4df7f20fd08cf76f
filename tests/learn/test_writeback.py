"""Write-back: the user's text is never touched, sections are replaced whole, a second run
changes nothing, Claude Code's lessons stay personal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ember.learn.writeback import (
    LEARN,
    Recommendation,
    WritebackError,
    apply_writeback,
    parse_sections,
    plan_writeback,
    read_learned,
)
from ember.markers import MarkerError

R = Recommendation


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


def run(project: Path, recs: list[Recommendation], **kw: object) -> list[Path]:
    return apply_writeback(plan_writeback(recs, project=project, **kw))  # type: ignore[arg-type]


def test_dry_run_writes_nothing_and_shows_the_diff(tmp_path: Path) -> None:
    git_init(tmp_path)
    exclude = tmp_path / ".git" / "info" / "exclude"
    exclude_before = exclude.read_bytes()
    plan = plan_writeback(
        [R("Paths", "Sources live in src/app, not app/")], agent="claude", project=tmp_path
    )
    assert not (tmp_path / "CLAUDE.local.md").exists()
    assert exclude.read_bytes() == exclude_before
    diff = plan.diff()
    assert "+++ " + str(tmp_path / "CLAUDE.local.md") in diff
    assert "+- Sources live in src/app, not app/" in diff
    assert "+/CLAUDE.local.md" in diff
    assert plan.added == ("Paths",)


def test_text_outside_the_markers_is_untouched_byte_for_byte(tmp_path: Path) -> None:
    target = tmp_path / "AGENTS.md"
    before = "# Team rules\r\n\r\nUse tabs.   \r\n"
    after = "\r\n## Mine\r\nkeep ✓\r\n"
    target.write_bytes((before + LEARN.wrap("### Old\n\n- stale", "\r\n") + after).encode())
    run(tmp_path, [R("Old", "fresh")], agent="codex")
    text = target.read_bytes().decode()
    assert text.startswith(before) and text.endswith(after)
    assert "- fresh" in text and "stale" not in text
    assert "\n" not in text.replace("\r\n", "")  # the file's line endings are kept


def test_second_run_is_idempotent(tmp_path: Path) -> None:
    recs = [R("Build", "Run `make test`, not pytest directly"), R("Build", "Needs Python 3.12")]
    assert run(tmp_path, recs, agent="codex") == [tmp_path / "AGENTS.md"]
    first = (tmp_path / "AGENTS.md").read_bytes()
    plan = plan_writeback(recs, agent="codex", project=tmp_path)
    assert not plan.changed and plan.diff() == ""
    assert apply_writeback(plan) == []
    assert (tmp_path / "AGENTS.md").read_bytes() == first


def test_re_emitted_sections_are_replaced_whole_and_the_others_kept(tmp_path: Path) -> None:
    run(tmp_path, [R("Paths", "old path rule"), R("Tests", "use -x")], agent="codex")
    plan = plan_writeback(
        [R("paths", "new path rule"), R("Git", "never force-push")], agent="codex", project=tmp_path
    )
    assert (plan.replaced, plan.added, plan.kept) == (("paths",), ("Git",), ("Tests",))
    apply_writeback(plan)
    learned = read_learned(tmp_path / "AGENTS.md")
    assert learned == {"paths": "- new path rule", "Tests": "- use -x", "Git": "- never force-push"}


def test_multi_line_recommendations_stay_one_bullet() -> None:
    body = LEARN.wrap("### A\n\n- first\n  continued\n- second")
    assert parse_sections(LEARN.body(body)) == {"A": "- first\n  continued\n- second"}


def test_claude_defaults_to_the_personal_file_excluded_from_git(tmp_path: Path) -> None:
    git_init(tmp_path)
    written = run(tmp_path, [R("Env", "uv is at ~/.local/bin/uv")], agent="claude")
    assert tmp_path / "CLAUDE.local.md" in written
    assert not (tmp_path / "CLAUDE.md").exists()
    status = subprocess.run(
        ["git", "-C", str(tmp_path), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "CLAUDE.local.md" not in status
    exclude = (tmp_path / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/CLAUDE.local.md") == 1
    run(tmp_path, [R("Env", "uv moved")], agent="claude")  # not added twice
    assert (tmp_path / ".git" / "info" / "exclude").read_text() == exclude


def test_a_subdirectory_project_is_excluded_by_its_path(tmp_path: Path) -> None:
    git_init(tmp_path)
    sub = tmp_path / "svc"
    sub.mkdir()
    run(sub, [R("Env", "x")], agent="claude")
    assert "/svc/CLAUDE.local.md" in (tmp_path / ".git" / "info" / "exclude").read_text()


def test_a_legacy_block_in_claude_md_moves_to_the_personal_file(tmp_path: Path) -> None:
    git_init(tmp_path)
    team = "# Team conventions\n\nReview every PR.\n"
    shared = tmp_path / "CLAUDE.md"
    shared.write_text(team + "\n" + LEARN.wrap("### Old lesson\n\n- keep me") + "\n")
    plan = plan_writeback([R("New", "learned now")], agent="claude", project=tmp_path)
    assert plan.migrated_from == shared and plan.kept == ("Old lesson",)
    apply_writeback(plan)
    assert shared.read_text() == team
    assert read_learned(tmp_path / "CLAUDE.local.md") == {
        "Old lesson": "- keep me",
        "New": "- learned now",
    }
    assert not plan_writeback([R("New", "learned now")], agent="claude", project=tmp_path).changed


def test_target_overrides_and_touches_no_other_file(tmp_path: Path) -> None:
    git_init(tmp_path)
    shared = tmp_path / "CLAUDE.md"
    shared.write_text(LEARN.wrap("### Old\n\n- x") + "\n")
    exclude = tmp_path / ".git" / "info" / "exclude"
    exclude_before = exclude.read_bytes()
    target = tmp_path / "docs" / "LESSONS.md"
    assert run(tmp_path, [R("A", "b")], agent="claude", target=target) == [target]
    assert shared.read_text() == LEARN.wrap("### Old\n\n- x") + "\n"
    assert exclude.read_bytes() == exclude_before


def test_a_file_edited_after_planning_is_not_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "AGENTS.md"
    target.write_text("mine\n")
    plan = plan_writeback([R("A", "b")], agent="codex", project=tmp_path)
    target.write_text("mine, edited meanwhile\n")
    with pytest.raises(WritebackError, match="changed since the plan"):
        apply_writeback(plan)
    assert target.read_text() == "mine, edited meanwhile\n"


def test_broken_markers_stop_the_run(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(f"{LEARN.start}\nno end\n")
    with pytest.raises(MarkerError, match="unmatched ember markers"):
        plan_writeback([R("A", "b")], agent="codex", project=tmp_path)


def test_unknown_agent_asks_for_a_target(tmp_path: Path) -> None:
    with pytest.raises(WritebackError, match="--target"):
        plan_writeback([R("A", "b")], agent="cursor", project=tmp_path)


def test_a_linked_worktree_uses_the_main_repositorys_exclude_file(tmp_path: Path) -> None:
    main = tmp_path / "main"
    git_init(main)
    git = ["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    linked = tmp_path / "linked"
    subprocess.run([*git, "worktree", "add", "-q", str(linked)], check=True)
    run(linked, [R("Env", "x")], agent="claude")
    assert "/CLAUDE.local.md" in (main / ".git" / "info" / "exclude").read_text()
    status = subprocess.run(
        ["git", "-C", str(linked), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""


def test_a_lesson_that_quotes_a_key_is_written_with_the_key_masked(tmp_path: Path) -> None:
    token = "ghp_" + "Zx8Cv2Bn6Mq4Wr0Ty3Ui7Op1As5Df9Gh2Jk8L"
    lesson = f"Push tags with `git push https://bot:{token}@github.com/acme/app` from CI"
    written = run(tmp_path, [R("Release", lesson)], agent="codex")
    text = "".join(p.read_text() for p in written)
    assert token not in text
    assert "git push https://bot:[redacted" in text
