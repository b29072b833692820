"""A headless Chromium for the tests that look at pages: the web console (/ui,
tests/integration/test_console.py) and the simulator's HTML reports.

chrome() yields a selenium WebDriver on Debian's /usr/bin/chromium through
/usr/bin/chromedriver (both from scripts/install-deps.sh, with
python3-selenium); where either is missing the test fails, it never skips.
The flags keep Chromium off the network: the test machines have none, and
without them Chromium waits on connections to Google's services at start.
Each browser gets a fresh profile directory, removed afterwards, so no token
or cache leaks from one test into the next.

screenshot(driver, name) saves a PNG under $GS_ARTIFACTS (default
build/test-artifacts/ under the repository root) and returns its path;
image_stats(path) reads it back (size, pixel variance) so a test can assert
that what it saved shows something.
"""
import contextlib
import os
import pathlib
import re
import shutil
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--disable-extensions", "--disable-default-apps",
         "--no-default-browser-check", "--metrics-recording-only", "--password-store=basic"]


def require_browser():
    """Fails the calling test (never skips it) when Chromium, its driver or selenium is missing."""
    for path, what in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{what} not found at {path}: install it (scripts/install-deps.sh)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail("python3-selenium is not installed: install it (scripts/install-deps.sh)")


@contextlib.contextmanager
def chrome(width=1400, height=900, extra_flags=(), accept_insecure_certs=False, trace_categories=None):
    """A headless Chromium WebDriver, quit (and its profile removed) on exit.

    accept_insecure_certs: for a server whose certificate Chromium cannot
    verify (gpusched's own CA is not in the system store); tests that care
    about TLS check it with requests against the CA instead.
    trace_categories: Chromium trace categories (e.g. "devtools.timeline")
    to record into the driver's "performance" log, read with
    driver.get_log("performance") (bench/console.py --trace)."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="gs-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.add_argument(f"--window-size={width},{height}")
    for f in extra_flags:
        opts.add_argument(f)
    if accept_insecure_certs:
        opts.accept_insecure_certs = True
    # the browser's console messages, for a test to print when it fails
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", **({"performance": "ALL"} if trace_categories else {})})
    if trace_categories:
        opts.add_experimental_option("perfLoggingPrefs", {"traceCategories": trace_categories,
                                                          "enableNetwork": False, "enablePage": False})
    log = pathlib.Path(profile + ".chromedriver.log")
    service = Service(executable_path=CHROMEDRIVER, log_path=str(log))
    driver = None
    try:
        try:
            driver = webdriver.Chrome(service=service, options=opts)
        except Exception as e:  # selenium's errors carry the driver's reason; add its log
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            pytest.fail(f"chromium did not start through {CHROMEDRIVER}: {e}\n{tail}")
        driver.set_page_load_timeout(30)
        driver.set_script_timeout(30)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        with contextlib.suppress(OSError):
            log.unlink()


def artifacts_dir():
    d = pathlib.Path(os.environ.get("GS_ARTIFACTS") or ROOT / "build" / "test-artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def screenshot(driver, name):
    """Saves the viewport as ARTIFACTS/<name>.png (name made file-safe) and returns the path."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "screenshot"
    path = artifacts_dir() / f"{safe}.png"
    if not driver.save_screenshot(str(path)):
        raise AssertionError(f"chromium could not save the screenshot {path}")
    return path


def image_stats(path):
    """(width, height, variance of the grey levels, distinct grey levels) of a PNG:
    a blank or single-colour page has a variance near 0 and a handful of levels."""
    from PIL import Image, ImageStat
    with Image.open(path) as im:
        grey = im.convert("L")
        var = ImageStat.Stat(grey).var[0]
        levels = sum(1 for c in grey.histogram() if c)
        return im.width, im.height, var, levels


def assert_not_blank(path, min_width=400, min_height=300, min_var=20.0, min_levels=8):
    """A screenshot that shows something: big enough, and not one flat colour."""
    w, h, var, levels = image_stats(path)
    assert w >= min_width and h >= min_height, f"{path}: {w}x{h}, want at least {min_width}x{min_height}"
    assert var >= min_var and levels >= min_levels, \
        f"{path} looks blank: grey variance {var:.1f} (want >= {min_var}), {levels} grey levels"
    return w, h, var, levels


def browser_log(driver):
    """The page's console messages so far, one per line (for failure messages)."""
    try:
        return "\n".join(f"{e.get('level')}: {e.get('message')}" for e in driver.get_log("browser"))
    except Exception as e:  # the log is a help for diagnosis, never a reason to fail
        return f"(no browser log: {e})"
