"""Headless Chromium for the tests of pages a person looks at (``remora show``).

Method: Chromium's own command line — ``--dump-dom`` prints the live DOM *after* the page's
scripts ran (so what the page's script drew, and the attributes it set from the real layout,
can be read back), ``--screenshot`` writes a PNG.  One process per call, a fresh profile
each time; no driver, port or websocket to keep in step with the browser's version.

Without Chromium the test skips with the reason — or fails under
``REMORA_REQUIRE_SERVICES=1`` (``.ci/run`` installs Debian's ``chromium`` when missing).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.common.services import unavailable

FLAGS = (
    "--headless",
    "--no-sandbox",  # runs as root here
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
NAMES = ("chromium", "chromium-browser", "google-chrome")


def require_chromium() -> str:
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    unavailable("Chromium", "no chromium on PATH (apt-get install chromium)")
    raise AssertionError("unreachable")


def _run(page: Path | str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Chromium on ``page``: a file, or a URL (a page a test serves)."""
    binary = require_chromium()
    where = page if isinstance(page, str) else page.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="remora-chromium-") as profile:
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *extra, where],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def dump_dom(page: Path | str, size: tuple[int, int] | None = None) -> str:
    """The page's DOM after its scripts ran, serialized by the browser (in a window of
    ``size`` pixels, when given: the page's layout facts depend on it)."""
    extra = () if size is None else (f"--window-size={size[0]},{size[1]}",)
    done = _run(page, *extra, "--dump-dom")
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path | str, out: Path, size: tuple[int, int] = (1400, 900)) -> Path:
    done = _run(page, f"--window-size={size[0]},{size[1]}", f"--screenshot={out.resolve()}")
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]
    return out


if __name__ == "__main__":  # python -m tests.common.browser PAGE.html|URL OUT.png [WxH]
    import sys

    size = tuple(int(n) for n in (sys.argv[3] if len(sys.argv) > 3 else "1400x900").split("x"))
    page = sys.argv[1] if "://" in sys.argv[1] else Path(sys.argv[1])
    print(screenshot(page, Path(sys.argv[2]), (size[0], size[1])))
