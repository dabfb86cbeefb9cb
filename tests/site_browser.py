"""The built book site and a headless browser, shared by the browser tests (test_site*.py).

The site is `_build/html` (made by `make book-strict` before `make test`), or the folder named by
the BOOK_SITE environment variable (`jupyter-book build . --path-output DIR` → DIR/_build/html).
A test module imports the fixtures it uses by name and calls `skip_unless_built()` first.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_SITE", ROOT / "_build" / "html"))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def skip_unless_built() -> None:
    """Skip the calling test module when there is no built site."""
    if not (SITE / "index.html").is_file():
        pytest.skip("the book is not built: run `make book` (or `jupyter-book build .`) first",
                    allow_module_level=True)


def toc_pages() -> list[str]:
    """The html path (relative to the site) of every page in _toc.yml, in order."""
    files = re.findall(r"^\s*(?:root|-\s*file):\s*(\S+)\s*$", (ROOT / "_toc.yml").read_text(encoding="utf-8"), re.M)
    return [f"{name}.html" for name in files]


def shows_code(page_html: str) -> bool:
    """Whether a built page shows a code cell's source: only such pages have launch buttons."""
    return 'class="cell_input' in page_html


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep pytest's output readable
        pass


@pytest.fixture(scope="module")
def server():
    """The site served on 127.0.0.1: its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (a 1280 × 900 window) that keeps the console's messages."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(f"needs {CHROMIUM} and {CHROMEDRIVER} (`make sysdeps` installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tfm-book-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def wait(driver, condition, timeout: float = 30.0):
    """What ``condition(driver)`` returns once it is truthy (a TimeoutException after ``timeout`` s)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)
