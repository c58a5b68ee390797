#!/usr/bin/env python3
"""Load the localizer's status page in headless Chromium and check it.

Run by tests/src/browser.rs (Debian's chromium, chromium-driver and
python3-selenium). Loads URL, reloads until the verdict table shows a row
for the expected component in the expected state (or the deadline passes),
then checks the page as a person would meet it: the title, the matrix and
history drawings, no <script> element, and no error in the browser console
(a CSP violation, a failed request, a script error all show there).

The last line printed is `RESULT {json}` with what the page showed.
Exit status: 0 the page passed, 1 a check failed (the reason on stderr),
3 the browser could not be started (selenium or chromium missing).
"""

import argparse
import json
import sys
import time

UNAVAILABLE = 3


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="the status page")
    p.add_argument("--kind", help="expected component kind (e.g. tor)")
    p.add_argument("--id", help="expected component id (e.g. tor1)")
    p.add_argument("--state", default="firing", help="expected verdict state")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the verdict")
    p.add_argument("--screenshot", help="save a PNG of the page here")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    return p.parse_args()


def start(args):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        print(f"selenium is not importable ({e}); install python3-selenium", file=sys.stderr)
        sys.exit(UNAVAILABLE)
    opts = webdriver.ChromeOptions()
    opts.binary_location = args.chromium
    # As little work beside the page as Chromium allows: the machine also
    # runs the fabric under test.
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1800", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-default-apps", "--no-default-browser-check", "--mute-audio",
              "--renderer-process-limit=1", "--disable-breakpad",
              "--disable-features=Translate,OptimizationHints,MediaRouter"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=opts)
    except Exception as e:  # any failure to start is "no browser here"
        print(f"cannot start {args.chromium} through {args.chromedriver}: {e}", file=sys.stderr)
        sys.exit(UNAVAILABLE)


def read_page(driver):
    """What the page shows now; None when it reloaded under us or is not
    the status page (an error page while the server is unreachable)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    try:
        rows = []
        for tr in driver.find_elements(By.CSS_SELECTOR, "#verdicts tr.verdict"):
            cell = lambda c: tr.find_element(By.CSS_SELECTOR, "td." + c).text.strip()
            rows.append({"state": cell("state"), "kind": cell("kind"), "id": cell("component")})
        return {
            "title": driver.title,
            "h1": driver.find_element(By.TAG_NAME, "h1").text,
            "banner": driver.find_element(By.CSS_SELECTOR, "#summary .banner").text,
            "verdicts": rows,
            "matrix_cells": len(driver.find_elements(By.CSS_SELECTOR, "#matrix svg.matrix rect")),
            "history_svg": len(driver.find_elements(By.CSS_SELECTOR, "#history svg.history")),
            "scripts": len(driver.find_elements(By.TAG_NAME, "script")),
            "links": [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "footer a")],
        }
    except (StaleElementReferenceException, NoSuchElementException):
        return None


def wanted(seen, args):
    if not args.kind:
        return True
    return any(r["kind"] == args.kind and r["id"] == args.id and r["state"] == args.state
               for r in seen["verdicts"])


def check(driver, args):
    deadline = time.monotonic() + args.timeout
    driver.get(args.url)
    seen = None
    while True:
        seen = read_page(driver) or seen
        if seen is not None and wanted(seen, args):
            break
        if time.monotonic() > deadline:
            if seen is None:
                return None, f"{args.url} did not show the status page within {args.timeout:.0f} s (title {driver.title!r})"
            return seen, f"no {args.state} verdict for {args.kind} {args.id} within {args.timeout:.0f} s"
        time.sleep(1.0)
        driver.refresh()
    # The page reloads itself every cycle: a reload landing between two
    # reads of one pass leaves the later reads on a document still loading.
    # Confirm a missing strip on fresh reads before calling it missing.
    for _ in range(3):
        if seen["history_svg"] == 1:
            break
        time.sleep(1.0)
        driver.refresh()
        seen = read_page(driver) or seen
    errors = []
    if "SkeletonHunter" not in seen["title"]:
        errors.append(f"unexpected title {seen['title']!r}")
    if seen["history_svg"] != 1:
        errors.append("no history strip")
    if seen["scripts"]:
        errors.append(f"{seen['scripts']} <script> element(s) on a page that must have none")
    if not any(h.endswith("/-/ready") for h in seen["links"]):
        errors.append(f"no link to /-/ready among {seen['links']}")
    return seen, "; ".join(errors) or None


def main():
    args = parse_args()
    if bool(args.kind) != bool(args.id):
        print("--kind and --id go together", file=sys.stderr)
        sys.exit(2)
    driver = start(args)
    try:
        seen, failure = check(driver, args)
        logs = driver.get_log("browser")
        console = [f"{e.get('level')}: {e.get('message')}" for e in logs if e.get("level") == "SEVERE"]
        if args.screenshot:
            driver.save_screenshot(args.screenshot)
    finally:
        driver.quit()
    seen = dict(seen or {}, console_errors=console)
    if console and not failure:
        failure = f"{len(console)} console error(s): {console}"
    print("RESULT " + json.dumps(seen))
    if failure:
        print(f"status page check failed: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
