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
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_SITE", ROOT / "_build" / "html"))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
DESKTOP, PHONE = 1280, 390  # CSS pixels: a laptop window, an iPhone 12–15 in portrait


def skip_unless_built() -> None:
    """Skip the calling test module when there is no built site."""
    if not (SITE / "index.html").is_file():
        pytest.skip("the book is not built: run `make book` (or `jupyter-book build .`) first",
                    allow_module_level=True)


def edition_folders() -> list[str]:
    """Where each edition of the book sits in the site (_config.yml's book_editions): "" for English, then "zh/"."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
    return [f"{folder}/" if folder else "" for _language, folder, _name in config["book_editions"]]


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


@contextmanager
def chromium(network_log: bool = False):
    """Headless Chromium (a 1280 × 900 window) that keeps the console's messages, and with ``network_log`` the
    DevTools network events (``driver.get_log("performance")``)."""
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
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", **({"performance": "ALL"} if network_log else {})})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (`chromium`), one per test module."""
    with chromium() as driver:
        yield driver


def wait(driver, condition, timeout: float = 30.0):
    """What ``condition(driver)`` returns once it is truthy (a TimeoutException after ``timeout`` s)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)


@contextmanager
def viewport(browser, width: int):
    """The browser's page at ``width`` CSS pixels, as a phone (touch, mobile layout) below 576."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": 844 if width < 576 else 900, "deviceScaleFactor": 1,
                             "mobile": width < 576})
    try:
        yield
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@contextmanager
def theme(browser, mode: str):
    """Every page opened inside shows the site's ``mode`` ("light" or "dark") colour theme."""
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-color-scheme", "value": mode}]})
    try:
        yield
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


# A widget's figures (the src of each panel's image), for ``browser.execute_script(PANEL_SOURCES, widget)``.
PANEL_SOURCES = "return Array.from(arguments[0].querySelectorAll('.tfm-widget-panel img')).map(i => i.src);"

# Move a control (arguments[0]) as a reader would: a menu to its next option, a slider one step, a checkbox clicked.
MOVE_CONTROL = """
const input = arguments[0];
if (input.tagName === "SELECT") {
  input.selectedIndex = (input.selectedIndex + 1) % input.options.length;
} else if (input.type === "checkbox") {
  input.checked = !input.checked;
} else {
  input.value = Number(input.value) < Number(input.max) ? Number(input.value) + 1 : Number(input.value) - 1;
}
input.dispatchEvent(new Event("input", {bubbles: true}));
"""
