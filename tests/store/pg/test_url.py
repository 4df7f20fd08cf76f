"""``store_url`` as a user writes it: a bad value stops ember with what to write instead, and
the password in a good one never shows — not in an error, the settings' repr, the proxy's
banner, a health line or ``ember stats`` (issue #24)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.cli.proxy import _storage_banner
from ember.compose import spec
from ember.config import load_settings
from ember.errors import ConfigError
from ember.store.pg.url import redacted
from ember.store.registry import Storage

PASSWORD = "Pa55-w0rd-never-shown"
EMBER = str(Path(sys.executable).with_name("ember"))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (f"mysql://ember:{PASSWORD}@db:3306/ember", "this is a mysql:// URL"),
        (f"sqlite:///home/me/{PASSWORD}.db", "this is a sqlite:// URL"),
        (f"ember:{PASSWORD}@db:5432/ember", "this is not a URL"),
        (f"postgresql://ember:{PASSWORD}@db:54x2/ember", "a port that is not a number"),
    ],
)
def test_a_bad_store_url_is_refused_saying_what_to_write_and_not_the_password(
    value: str, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(env={"EMBER_STORE_URL": value})
    message = str(raised.value)
    assert message.startswith("EMBER_STORE_URL: ")
    assert says in message and "postgresql://user:password@host:5432/" in message
    assert PASSWORD not in message


def test_the_config_files_key_is_named_when_it_is_wrong(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'store_url = "http://ember:{PASSWORD}@db/ember"\n')
    with pytest.raises(ConfigError, match=r"^config\.toml: store_url: ") as raised:
        load_settings(config)
    assert PASSWORD not in str(raised.value)


def test_empty_means_the_sqlite_files() -> None:
    assert load_settings(env={"EMBER_STORE_URL": ""}).store_url is None
    assert load_settings(env={}).store_url is None
    assert Storage(Path("/nonexistent"), store_url=None).postgres is False


def test_a_good_url_is_kept_whole_and_shown_without_its_password() -> None:
    url = f"postgresql://ember:{PASSWORD}@db.internal:6543/team?sslmode=require"
    settings = load_settings(env={"EMBER_STORE_URL": url})
    assert settings.store_url == url
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings)
    assert redacted(url) == "ember@db.internal:6543/team"
    [banner] = _storage_banner(settings)
    assert "ember@db.internal:6543/team" in banner and PASSWORD not in banner
    off = spec().not_on_postgres
    assert all(name in banner for name in off)  # the features that stay off there are named
    assert redacted("postgres://db/x") == "db:5432/x"
    assert redacted("postgresql:///ember?host=/run/pg") == "/run/pg:5432/ember"


def test_a_url_libpq_cannot_read_is_refused_when_the_storage_is_built() -> None:
    """An unknown parameter after '?': libpq's own message quotes the token, so it is not
    passed on."""
    url = f"postgresql://ember:{PASSWORD}@db/ember?sslmod=require"
    settings = load_settings(env={"EMBER_STORE_URL": url})
    with pytest.raises(ConfigError, match="cannot be read by libpq") as raised:
        Storage(settings.home, store_url=settings.store_url)
    assert PASSWORD not in str(raised.value)


@pytest.mark.parametrize(
    "password", ["p@ss:w/rd", "50%off", "a?b#c", "[x]@@y", "plain-Pa55", "p%41ss"]
)
def test_a_password_is_read_as_it_was_typed(password: str) -> None:
    """'@', ':', '/', '?', '#' and a stray '%' in a password need no encoding by hand: the
    user part ends at the last '@' before the host, libpq gets the password as typed (a
    '%' before two hex digits is read as an encoding made already), and nothing shows it."""
    from psycopg.conninfo import conninfo_to_dict

    from ember.store.pg.url import conninfo, scrubbed

    typed = f"postgresql://ember:{password}@db.internal:6543/team?sslmode=require"
    settings = load_settings(env={"EMBER_STORE_URL": typed})
    assert settings.store_url is not None
    given = conninfo_to_dict(conninfo(settings.store_url))
    expected = "pAss" if password == "p%41ss" else password
    assert given["password"] == expected and given["host"] == "db.internal"
    assert given["port"] == "6543" and given["dbname"] == "team"
    assert redacted(settings.store_url) == "ember@db.internal:6543/team"
    said = f"connection to {settings.store_url} failed for {expected}"
    assert expected not in scrubbed(said, settings.store_url)


def test_a_url_with_an_at_sign_after_the_host_keeps_its_meaning() -> None:
    """An '@' in a parameter of a URL that already reads the usual way stays the
    parameter's: only a URL that cannot be read so is taken apart at its last '@'."""
    from ember.store.pg.url import normalized

    url = "postgresql://ember:pw@db/ember?application_name=me@laptop"
    assert normalized(url) == url


def test_without_psycopg_the_error_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an import of it now fails
    with pytest.raises(ConfigError, match=r"pip install 'ember\[postgres\]'"):
        Storage(Path("/nonexistent"), store_url="postgresql://ember@db/ember")


def _ember(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    return subprocess.run(
        [EMBER, *args],
        env={**clean, "EMBER_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ember_stats_with_a_bad_url_exits_with_one_line(tmp_path: Path) -> None:
    done = _ember(tmp_path, "stats", EMBER_STORE_URL=f"mysql://ember:{PASSWORD}@db/ember")
    assert done.returncode == 2
    assert "EMBER_STORE_URL: " in done.stderr and "Traceback" not in done.stderr
    assert PASSWORD not in done.stderr + done.stdout


def test_ember_stats_with_no_server_says_so_without_the_password(tmp_path: Path) -> None:
    from ember.server import free_port

    url = f"postgresql://ember:{PASSWORD}@127.0.0.1:{free_port()}/ember"
    done = _ember(tmp_path, "stats", "--project-id", "acme", EMBER_STORE_URL=url)
    assert done.returncode == 2, done.stderr
    assert "cannot be reached" in done.stderr and "Traceback" not in done.stderr
    assert "ember@127.0.0.1" in done.stderr and PASSWORD not in done.stderr + done.stdout
