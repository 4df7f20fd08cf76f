"""The proxy's log file (``ember proxy --log-file``: the proxy ``ember wrap`` starts): appended
to, rotated at a size with a few older files kept, and what the process writes to its own
stderr (uvicorn's lines, a crash) follows the file to the new one at each rotation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import logging, sys
from pathlib import Path
from ember import logs
logs.LOG_FILE_BYTES = 2000
logs.configure("info", Path(sys.argv[1]))
for i in range(300):
    logging.getLogger("t").info("line %03d", i)
print("written to stderr after the rotations", file=sys.stderr, flush=True)
"""


def test_the_log_file_rotates_keeps_three_older_files_and_takes_stderr_along(
    tmp_path: Path,
) -> None:
    log = tmp_path / "proxy-8787.log"
    log.write_text("--- the run before\n")
    with open(log, "ab") as out:  # as ember wrap starts the proxy: stdout and stderr to it
        subprocess.run([sys.executable, "-c", SCRIPT, str(log)], stdout=out, stderr=out, check=True)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == [log.name, *(f"{log.name}.{n}" for n in (1, 2, 3))]
    assert all(p.stat().st_size <= 2100 for p in tmp_path.iterdir())
    text = log.read_text()
    assert "line 299" in text  # the newest lines are in the file the wrap names
    assert "written to stderr after the rotations" in text


LEAKS = """
import logging, sys
from pathlib import Path
from ember import logs
logs.LOG_FILE_BYTES = 2000
logs.configure("debug", Path(sys.argv[1]) if len(sys.argv) > 1 else None)
key = "fake-credential-77d2"
headers = {"host": "h", "authorization": "Bearer " + key}
logging.getLogger("websockets.server").debug("< x-api-key: %s", key)
logging.getLogger("uvicorn.error").info("scope headers %s", [(b"authorization", key.encode())])
logging.getLogger("aiohttp.client").warning("request %r", headers)
try:
    raise ValueError(f"upstream refused {headers}")
except ValueError:
    logging.getLogger("ember.proxy").exception("failed with %s", headers)
logging.getLogger("t").error("bad %d format", "x-api-key: " + key)  # args that do not fit
for i in range(100):
    logging.getLogger("t").info("filler %03d", i)
"""
KEY = b"fake-credential-77d2"


def test_no_credential_reaches_the_log_file_or_stderr_at_any_level(tmp_path: Path) -> None:
    log = tmp_path / "run" / "proxy-8787.log"
    with open(tmp_path / "stderr", "wb") as err:
        subprocess.run([sys.executable, "-c", LEAKS, str(log)], stderr=err, check=True)
        subprocess.run([sys.executable, "-c", LEAKS], stderr=err, check=True)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 2  # the log rotated: older files too
    for path in written:
        assert KEY not in path.read_bytes(), path
    text = (tmp_path / "stderr").read_text() + "".join(
        p.read_text() for p in written if p.name.startswith("proxy-")
    )
    assert text.count("[redacted credential]") >= 2 * 5  # each line was written, masked
    assert "ValueError: upstream refused" in text  # the traceback is kept, masked


def test_the_log_folder_and_every_log_file_are_private(tmp_path: Path) -> None:
    log = tmp_path / "home" / "run" / "proxy-8787.log"
    subprocess.run([sys.executable, "-c", SCRIPT, str(log)], check=True)
    assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
    assert log.parent.stat().st_mode & 0o777 == 0o700
    files = list(log.parent.iterdir())
    assert len(files) == 4  # the file and three rotated ones
    assert {p.stat().st_mode & 0o777 for p in files} == {0o600}


def test_a_command_without_logging_set_up_masks_its_warnings_too() -> None:
    script = (
        "import logging\nfrom ember.cli import mask_last_resort\nmask_last_resort()\n"
        "logging.getLogger('ember.x').warning('upstream said %s', {'x-api-key': 'k-77d2-abc'})"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert r.stderr == "upstream said {'x-api-key': '[redacted credential]'}\n"
