"""Tender in a real browser: headless Chromium through Selenium, against a `tender serve` of its own.

Starts the server on a free loopback port with a fresh migrated database and the sandbox bootstrapped
(as `make run` does), then drives the demo store through the sandbox sheet, the Apple Pay JS path with a
stubbed ApplePaySession, and the operator console. Screenshots go to $TENDER_DATA_DIR/browser-artifacts/.
Prints `N passed, M failed` last and exits non-zero when anything failed.

Needs TENDER_DATABASE_URL (any database on the server: a fresh one is created beside it and dropped).
"""

from decimal import Decimal
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_DIR = os.environ.get("TENDER_DATA_DIR") or os.path.join(ROOT, ".tender")
ARTIFACTS = os.path.join(DATA_DIR, "browser-artifacts")
TENDER = os.environ.get("TENDER_BINARY") or os.path.join(ROOT, ".build", "debug", "tender")
STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "applepay_stub.js")
SHEET_TIMEOUT_MS = 30000


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


# MARK: - Database and server


def database_urls():
    base = os.environ.get("TENDER_DATABASE_URL") or os.environ.get("TENDER_TEST_DATABASE_URL")
    if not base:
        raise SystemExit("browser tests: TENDER_DATABASE_URL is required")
    parts = urllib.parse.urlsplit(base)
    name = "tender_browser_" + secrets.token_hex(4)
    fresh = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    return base, fresh, name


def psql(url, sql, timeout=60):
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], check=True, capture_output=True, timeout=timeout)


class Server:
    """`tender migrate`, `tender sandbox bootstrap`, then `tender serve` on 127.0.0.1:0."""

    def __init__(self):
        self.admin_url, self.url, self.database = database_urls()
        self.data_dir = os.path.join(DATA_DIR, "browser-run-" + secrets.token_hex(4))
        os.makedirs(self.data_dir, mode=0o700)
        psql(self.admin_url, f"CREATE DATABASE {self.database}")
        self.env = dict(os.environ, TENDER_DATABASE_URL=self.url, TENDER_DATA_DIR=self.data_dir,
                        TENDER_MIGRATIONS_DIR=os.path.join(ROOT, "migrations"), TENDER_LOG_FORMAT="json")
        self.env.pop("TENDER_APPLE_ROOTS", None)
        subprocess.run([TENDER, "migrate"], env=self.env, check=True, capture_output=True)
        boot = subprocess.run([TENDER, "sandbox", "bootstrap"], env=self.env, check=True, capture_output=True, text=True)
        found = re.search(r"sandbox API key \(shown once\): (\S+)", boot.stdout)
        check(found is not None, "sandbox bootstrap printed no API key")
        self.api_key = found.group(1)
        serve_env = dict(self.env, TENDER_DEMO="on", TENDER_LISTEN="127.0.0.1:0",
                         TENDER_APPLE_ROOTS=os.path.join(self.data_dir, "sandbox", "root.pem"))
        self.process = subprocess.Popen([TENDER, "serve"], env=serve_env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.port = None
        self.log_lines = []
        ready = threading.Event()

        def read_log():
            for line in self.process.stderr:
                self.log_lines.append(line)
                if self.port is None:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if entry.get("msg") == "listening" or entry.get("message") == "listening":
                        self.port = int(entry["port"])
                        ready.set()
            ready.set()

        threading.Thread(target=read_log, daemon=True).start()
        ready.wait(30)
        check(self.port is not None, "tender serve did not report its port:\n" + "".join(self.log_lines[-20:]))
        self.base = f"http://127.0.0.1:{self.port}"

    def api(self, method, path, body=None, key=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + (key or self.api_key))
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def raw(self, path, headers=None):
        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        # Best effort: on a busy shared cluster DROP DATABASE can wait long for a checkpoint; the
        # database is uniquely named and empty of secrets, so a leftover does no harm.
        try:
            psql(self.admin_url, f"DROP DATABASE IF EXISTS {self.database}", timeout=20)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            print(f"browser tests: could not drop {self.database}; left behind", file=sys.stderr)


# MARK: - Browser


def new_browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-proxy-server",
                 "--window-size=1280,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def by_testid(testid):
    return (By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def wait(driver, seconds=15):
    return WebDriverWait(driver, seconds)


def screenshot(driver, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name + ".png")
    driver.save_screenshot(path)
    return path


def csp_violations(driver):
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def text_of(driver, testid):
    return driver.find_element(*by_testid(testid)).text


def total_text(driver):
    return text_of(driver, "total-amount")


def wait_total_change(driver, before):
    wait(driver).until(lambda d: total_text(d) not in ("", before))
    return total_text(driver)


def wait_idle(driver):
    """The sheet has no request in flight when Pay is enabled or an error explains why not."""
    time.sleep(0.2)
    wait(driver).until(lambda d: d.execute_script(
        "return document.querySelector('[data-testid=\"sheet-pay\"]') !== null"))


# MARK: - Tests


def test_security_headers(server, state):
    expected = {
        "/tender.js": "text/javascript", "/tender-sheet.css": "text/css", "/demo/": "text/html",
        "/demo/demo.js": "text/javascript", "/demo/demo.css": "text/css", "/console/": "text/html",
        "/console/console.js": "text/javascript", "/console/console.css": "text/css",
    }
    for path, content_type in expected.items():
        status, headers, body = server.raw(path)
        check(status == 200, f"{path}: status {status}")
        check(headers.get("Content-Type", "").startswith(content_type), f"{path}: Content-Type {headers.get('Content-Type')}")
        csp = headers.get("Content-Security-Policy", "")
        check("default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp,
              f"{path}: CSP {csp!r}")
        check(headers.get("X-Content-Type-Options") == "nosniff", f"{path}: nosniff missing")
        check(headers.get("Referrer-Policy") == "no-referrer", f"{path}: Referrer-Policy missing")
        etag = headers.get("ETag")
        check(etag and headers.get("Cache-Control") == "no-cache", f"{path}: caching headers {etag} {headers.get('Cache-Control')}")
        again, _, body304 = server.raw(path, {"If-None-Match": etag})
        check(again == 304 and body304 == b"", f"{path}: If-None-Match gave {again}")
    for path in ("/demo/../tender.js", "/demo/%2e%2e/migrations", "/console/../../etc/passwd", "/demo/index.html.bak"):
        status, _, _ = server.raw(path)
        check(status in (400, 404), f"{path}: traversal answered {status}")


def test_demo_purchase(server, state):
    driver = state["driver"]
    driver.get(server.base + "/demo/")
    wait(driver).until(EC.element_to_be_clickable(by_testid("add-to-cart")))
    screenshot(driver, "01-demo-store")
    mug = driver.find_element(By.CSS_SELECTOR, '[data-testid="add-to-cart"][data-sku="mug"]')
    mug.click()
    wait(driver).until(EC.element_to_be_clickable(by_testid("pay-button"))).click()
    wait(driver).until(EC.visibility_of_element_located(by_testid("sandbox-sheet")))
    wait(driver).until(lambda d: total_text(d) != "")
    # Mug 12.00 + standard shipping 4.99, as the catalog and the cart set them.
    wait(driver).until(lambda d: total_text(d) == "16.99 USD")
    check(driver.find_element(*by_testid("shipping-method-standard")).is_selected(), "standard is not the default")
    screenshot(driver, "02-sandbox-sheet")

    driver.find_element(*by_testid("shipping-method-express")).click()
    check(wait_total_change(driver, "16.99 USD") == "26.99 USD", f"express total {total_text(driver)}")

    coupon = driver.find_element(*by_testid("coupon-input"))
    coupon.send_keys("NOPE-NOT-A-CODE")
    driver.find_element(*by_testid("coupon-apply")).click()
    wait(driver).until(lambda d: d.find_element(*by_testid("coupon-input")).get_attribute("aria-invalid") == "true")
    error_id = coupon.get_attribute("aria-describedby")
    check(driver.find_element(By.ID, error_id).text != "", "the coupon error is not shown on the coupon field")
    check(total_text(driver) == "26.99 USD", "a bad coupon changed the total")
    screenshot(driver, "03-sheet-bad-coupon")
    coupon.clear()
    coupon.send_keys("SAVE10")
    driver.find_element(*by_testid("coupon-apply")).click()
    discounted = wait_total_change(driver, "26.99 USD")
    check(coupon.get_attribute("aria-invalid") is None, "the good coupon still shows an error")
    check(re.fullmatch(r"\d+\.\d\d USD", discounted) is not None
          and Decimal(discounted.split()[0]) < Decimal("26.99"), f"discounted total {discounted}")

    Select(driver.find_element(*by_testid("contact-country"))).select_by_value("FR")
    country = driver.find_element(*by_testid("contact-country"))
    wait(driver).until(lambda d: country.get_attribute("aria-invalid") == "true")
    check(driver.find_element(By.ID, country.get_attribute("aria-describedby")).text != "", "no country error shown")
    check(not driver.find_element(*by_testid("sheet-pay")).is_enabled(), "Pay is enabled for an unserviceable country")
    screenshot(driver, "04-sheet-unserviceable-country")
    Select(country).select_by_value("US")
    wait(driver).until(lambda d: country.get_attribute("aria-invalid") is None)
    wait(driver).until(EC.element_to_be_clickable(by_testid("sheet-pay")))
    shown = total_text(driver)
    driver.find_element(*by_testid("sheet-pay")).click()

    wait(driver, 30).until(EC.visibility_of_element_located(by_testid("result")))
    result = text_of(driver, "result")
    check(result.startswith("Payment succeeded"), f"result: {result}")
    payment_id = text_of(driver, "payment-id")
    screenshot(driver, "05-demo-result")
    status, payment = server.api("GET", "/v1/payments/" + payment_id)
    check(status == 200, f"GET payment: {status} {payment}")
    check(payment["status"] == "succeeded", f"payment status {payment['status']}")
    check(f"{payment['amount']} {payment['currencyCode']}" == shown, f"paid {payment['amount']}, sheet showed {shown}")
    status, session = server.api("GET", "/v1/checkout-sessions/" + payment["checkoutSessionId"])
    check(status == 200 and session["status"] == "paid", f"session after payment: {status} {session.get('status')}")
    check(csp_violations(driver) == [], f"CSP violations: {csp_violations(driver)}")
    state["payment"] = payment


def test_sandbox_sheet_keyboard_and_cancel(server, state):
    driver = state["driver"]
    driver.get(server.base + "/demo/")
    wait(driver).until(EC.element_to_be_clickable((By.CSS_SELECTOR, '[data-testid="add-to-cart"][data-sku="tee"]'))).click()
    pay = wait(driver).until(EC.element_to_be_clickable(by_testid("pay-button")))
    pay.click()
    sheet = wait(driver).until(EC.visibility_of_element_located(by_testid("sandbox-sheet")))
    check(sheet.get_attribute("role") == "dialog" and sheet.get_attribute("aria-modal") == "true", "not a modal dialog")
    title = driver.find_element(By.ID, sheet.get_attribute("aria-labelledby"))
    check(title.text != "", "the dialog has no accessible name")
    for testid in ("contact-country", "contact-postal-code", "coupon-input"):
        field = driver.find_element(*by_testid(testid))
        label = driver.find_elements(By.CSS_SELECTOR, f'label[for="{field.get_attribute("id")}"]')
        check(len(label) == 1 and label[0].text != "", f"{testid} has no label")
    check(driver.switch_to.active_element == sheet, "focus did not move into the sheet")
    wait(driver).until(lambda d: total_text(d) == "29.99 USD")  # 25.00 + 4.99, the catalog and the cart
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    wait(driver).until(EC.invisibility_of_element_located(by_testid("sandbox-sheet")))
    check(text_of(driver, "result").startswith("Payment failed"), f"result after Escape: {text_of(driver, 'result')}")
    check(driver.switch_to.active_element == pay, "focus did not return to the pay button")
    check(pay.is_enabled(), "the open session cannot be paid again after a cancel")


def stub_run(server, state, scenario, timeout_seconds=20):
    """Loads the demo with the stub injected, adds a mug, pays, and returns the stub's log."""
    driver = state["driver"]
    if state.get("stub_script"):
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": state["stub_script"]})
    with open(STUB) as f:
        source = f"window.__stubConfig = {json.dumps({'scenario': scenario})};\n" + f.read()
    state["stub_script"] = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": source})["identifier"]
    driver.get(server.base + "/demo/")
    wait(driver).until(EC.element_to_be_clickable((By.CSS_SELECTOR, '[data-testid="add-to-cart"][data-sku="mug"]'))).click()
    wait(driver).until(EC.element_to_be_clickable(by_testid("pay-button"))).click()
    wait(driver, timeout_seconds).until(EC.visibility_of_element_located(by_testid("result")))
    return driver.execute_script("return window.__stubLog"), text_of(driver, "result")


def completions(log, method):
    return [c for c in log["completions"] if c["method"] == method]


def test_apple_pay_js_happy(server, state):
    log, result = stub_run(server, state, "happy")
    check(log["errors"] == [], f"stub errors: {log['errors']}")
    names = [e["name"] for e in log["events"]]
    check(names == ["begin", "onvalidatemerchant", "onpaymentmethodselected", "onshippingcontactselected",
                    "onshippingmethodselected", "oncouponcodechanged", "onpaymentauthorized"], f"events {names}")
    check(log["constructed"]["version"] == 14, f"ApplePaySession version {log['constructed']['version']}")
    check("total" in log["constructed"]["request"] and "clientSecret" not in json.dumps(log["constructed"]),
          "the paymentRequest is not Apple's")
    pairs = {"/merchant-validation": "completeMerchantValidation", "/payment-method": "completePaymentMethodSelection",
             "/shipping-contact": "completeShippingContactSelection", "/shipping-method": "completeShippingMethodSelection",
             "/coupon-code": "completeCouponCodeChange", "/payments": "completePayment"}
    for suffix, method in pairs.items():
        answers = [r for r in log["responses"] if r["suffix"] == suffix]
        calls = completions(log, method)
        check(len(answers) == 1 and len(calls) == 1, f"{method}: {len(answers)} answers, {len(calls)} calls")
        sent = json.loads(answers[0]["text"])
        if suffix == "/payments":
            sent = sent["authorizationResult"]
        check(calls[0]["argument"] == sent, f"{method} got {calls[0]['argument']!r}, Tender returned {sent!r}")
        check(calls[0]["elapsedMilliseconds"] < SHEET_TIMEOUT_MS, f"{method} took {calls[0]['elapsedMilliseconds']} ms")
    check(completions(log, "completePayment")[0]["argument"]["status"] == 0, "payment not successful")
    check(result.startswith("Payment succeeded"), f"result: {result}")
    screenshot(state["driver"], "06-apple-pay-js-result")


def test_apple_pay_js_payment_timeout(server, state):
    log, result = stub_run(server, state, "payment_timeout", timeout_seconds=45)
    calls = completions(log, "completePayment")
    check(len(calls) == 1, f"completePayment calls: {calls}")
    check(calls[0]["argument"]["status"] == 1, f"timeout completed with {calls[0]['argument']}")
    check(calls[0]["elapsedMilliseconds"] < SHEET_TIMEOUT_MS, f"failure took {calls[0]['elapsedMilliseconds']} ms")
    check(result.startswith("Payment failed"), f"result: {result}")


def test_apple_pay_js_payment_answer_lost(server, state):
    log, result = stub_run(server, state, "payment_answer_lost")
    lost = [r for r in log["responses"] if r["suffix"] == "/payments"]
    check(len(lost) == 1 and json.loads(lost[0]["text"])["payment"]["status"] == "succeeded", f"the charge: {lost}")
    calls = completions(log, "completePayment")
    # Charged but unanswered: the session reads paid, so the sheet is told success, not a failure to retry.
    check(len(calls) == 1 and calls[0]["argument"]["status"] == 0, f"completePayment calls: {calls}")
    check(calls[0]["elapsedMilliseconds"] < SHEET_TIMEOUT_MS, "not completed in time")
    check(result.startswith("Payment succeeded"), f"result: {result}")


def test_apple_pay_js_contact_network_error(server, state):
    log, result = stub_run(server, state, "contact_network_error")
    calls = completions(log, "completeShippingContactSelection")
    check(len(calls) == 1, f"completeShippingContactSelection calls: {calls}")
    update = calls[0]["argument"]
    # The sheet keeps the total it shows (the last one Tender returned) and is told something failed.
    method_answer = [r for r in log["responses"] if r["suffix"] == "/payment-method"]
    check(update["newTotal"] == json.loads(method_answer[0]["text"])["newTotal"], f"fallback total {update['newTotal']}")
    check([e["code"] for e in update["errors"]] == ["unknown"], f"fallback errors {update.get('errors')}")
    check(calls[0]["elapsedMilliseconds"] < SHEET_TIMEOUT_MS, "the failure was not completed in time")
    check(result.startswith("Payment failed"), f"result: {result}")


def test_apple_pay_js_validation_failure(server, state):
    log, result = stub_run(server, state, "validation_failure")
    check([c["method"] for c in log["completions"]] == ["abort"], f"completions {log['completions']}")
    check(log["completions"][0]["elapsedMilliseconds"] < SHEET_TIMEOUT_MS, "abort was not in time")
    check(result.startswith("Payment failed"), f"result: {result}")


def test_console(server, state):
    payment = state.get("payment")
    check(payment is not None, "no payment from the demo purchase")
    driver = state["driver"]
    if state.get("stub_script"):
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": state["stub_script"]})
        state["stub_script"] = None
    driver.get(server.base + "/console/")
    wait(driver).until(EC.visibility_of_element_located(by_testid("api-key"))).send_keys(server.api_key)
    driver.find_element(*by_testid("sign-in")).click()
    pid = payment["id"]
    wait(driver).until(EC.visibility_of_element_located(by_testid(f"payment-row-{pid}")))
    check(text_of(driver, f"status-{pid}") == "succeeded", "console status is not succeeded")
    stored = driver.execute_script("return [sessionStorage.length, localStorage.length, document.cookie]")
    check(stored == [1, 0, ""], f"the key is not in sessionStorage alone: {stored}")
    point = f'[data-testid="balance-point"][data-description*="{pid}"]'
    wait(driver).until(EC.presence_of_element_located((By.CSS_SELECTOR, point)))
    points_before = len(driver.find_elements(*by_testid("balance-point")))
    screenshot(driver, "07-console")

    driver.find_element(*by_testid(f"refund-{pid}")).click()
    wait(driver).until(lambda d: "Refund re_" in text_of(d, f"refund-result-{pid}"))
    refund_text = text_of(driver, f"refund-result-{pid}")
    refund_id = re.search(r"(re_[a-z0-9]+)", refund_text).group(1)
    wait(driver).until(lambda d: len(d.find_elements(*by_testid("balance-point"))) == points_before + 1)
    refund_point = driver.find_elements(By.CSS_SELECTOR, f'[data-testid="balance-point"][data-description*="{refund_id}"]')
    check(len(refund_point) == 1, "the refund has no point on the chart")
    status, transactions = server.api("GET", "/v1/finance/transactions?limit=50")
    check(status == 200 and any(refund_id in t["transactionDescription"] for t in transactions["transactions"]),
          "the refund is not in the finance store")
    check("does not list" in text_of_id(driver, "reports-status") or driver.find_element(By.ID, "reports-table").is_displayed()
          or "No settlement reports" in text_of_id(driver, "reports-status"), "the reports section did not load")
    check(csp_violations(driver) == [], f"CSP violations: {csp_violations(driver)}")
    screenshot(driver, "08-console-refunded")


def test_console_settlement_report(server, state):
    payment = state.get("payment")
    check(payment is not None, "no payment from the demo purchase")
    gross = Decimal(payment["amount"])
    csv = ("settlement_date,batch_id,type,payment_id,processor_reference,currency,gross_amount,fee_amount,net_amount\n"
           f"2026-12-01,B1,payment,{payment['id']},{payment['processorReference']},USD,{gross},0.30,{gross - Decimal('0.30')}\n")
    request = urllib.request.Request(server.base + "/v1/settlement-reports?format=generic", data=csv.encode(), method="POST",
                                     headers={"Authorization": "Bearer " + server.api_key, "Content-Type": "text/csv"})
    with urllib.request.urlopen(request, timeout=15) as response:
        report = json.loads(response.read())
    check(report["counts"]["matched"] == 1, f"report counts {report['counts']}")
    driver = state["driver"]
    driver.get(server.base + "/console/")
    wait(driver).until(lambda d: d.find_element(By.ID, "sign-in").is_displayed() or d.find_element(By.ID, "signed-in").is_displayed())
    if driver.find_element(By.ID, "sign-in").is_displayed():
        driver.find_element(*by_testid("api-key")).send_keys(server.api_key)
        driver.find_element(*by_testid("sign-in")).click()
    wait(driver).until(lambda d: text_of_id(d, "reports-status") != "" or d.find_element(By.ID, "reports-table").is_displayed())
    row = driver.find_elements(*by_testid(f"report-row-{report['id']}"))
    if row:
        counts = row[0].text
    else:
        # Without a list endpoint the console opens a report by its id.
        check("does not list" in text_of_id(driver, "reports-status"), f"reports status: {text_of_id(driver, 'reports-status')}")
        driver.find_element(*by_testid("report-id")).send_keys(report["id"])
        driver.find_element(*by_testid("report-id")).submit()
        wait(driver).until(lambda d: report["id"] in text_of(d, "report-detail"))
        counts = text_of(driver, "report-detail")
    check("matched: 1" in counts, f"report counts shown: {counts!r}")
    screenshot(driver, "09-console-settlement-report")
    driver.find_element(*by_testid("sign-out")).click()
    wait(driver).until(EC.visibility_of_element_located(by_testid("api-key")))
    check(driver.execute_script("return sessionStorage.length") == 0, "sign-out left the key in sessionStorage")



def text_of_id(driver, element_id):
    return driver.find_element(By.ID, element_id).text


def test_demo_off_by_default(server, state):
    # The same binary without TENDER_DEMO: the store and its sandbox endpoints do not exist.
    env = dict(server.env, TENDER_LISTEN="127.0.0.1:0")
    process = subprocess.Popen([TENDER, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in process.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if "port" in entry:
                port = int(entry["port"])
                break
        check(port is not None, "second server reported no port")
        for path, expected in (("/demo/", 404), ("/tender.js", 200), ("/console/", 200)):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            check(status == expected, f"{path} without TENDER_DEMO: {status}")
    finally:
        process.terminate()
        process.wait(15)


TESTS = [test_security_headers, test_demo_purchase, test_sandbox_sheet_keyboard_and_cancel, test_apple_pay_js_happy, test_apple_pay_js_payment_answer_lost,
         test_apple_pay_js_contact_network_error,
         test_apple_pay_js_validation_failure, test_apple_pay_js_payment_timeout, test_console, test_console_settlement_report, test_demo_off_by_default]


def main():
    only = set(filter(None, os.environ.get("BROWSER_ONLY", "").split(",")))
    server = Server()
    state = {}
    passed = failed = 0
    try:
        state["driver"] = new_browser()
        for test in TESTS:
            if only and test.__name__ not in only and not (test.__name__ == "test_demo_purchase" and any("console" in n for n in only)):
                continue
            started = time.monotonic()
            try:
                test(server, state)
                passed += 1
                print(f"ok   {test.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
            except Exception as error:  # noqa: BLE001 - every failure is reported and counted
                failed += 1
                print(f"FAIL {test.__name__}: {error}", flush=True)
                if not isinstance(error, Failure):
                    traceback.print_exc()
                try:
                    screenshot(state["driver"], "failed-" + test.__name__)
                except Exception:  # noqa: BLE001
                    pass
    finally:
        if state.get("driver"):
            state["driver"].quit()
        server.stop()
        if failed:
            print("server log (last lines):\n" + "".join(server.log_lines[-15:]), file=sys.stderr)
    print(f"screenshots: {ARTIFACTS}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
