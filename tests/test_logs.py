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
