#!/usr/bin/python3
"""The console page in a real browser (Debian's chromium, chromium-driver, python3-selenium)
against a running relay on PostgreSQL: open with the token, the dead rows and their reasons, one
message and its attempts, replay it and see it sent, filter, a wrong token refused, a hostile
payload shown as text; the inbox list of stored webhooks, the lookup by source + idempotency key
leading to the outbox row, one inbox row (hostile payload as text, secret header redacted), a dead
inbox row discarded. Screenshots go to docs/console/ when QB_CONSOLE_SCREENSHOTS names it.

Usage: console_browser_test.py <queuebox binary>; needs QB_TEST_PG_URL. Exit 77 (skipped) without
it, chromium, chromedriver or selenium.
"""
import faulthandler
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

SKIP = 77
TOKEN = "console-browser-t0ken"
HOSTILE = '"><img src=x onerror="window.qbPwned=1"><script>window.qbPwned=2</script>'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sink(http.server.BaseHTTPRequestHandler):
    """The HTTP destinations: /hook answers 500 while failing, then 200; /ok always 200."""
    failing = True

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(500 if Sink.failing and self.path == "/hook" else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def psql(url, sql):
    return subprocess.run(["psql", url, "-Atqc", sql], check=True, capture_output=True,
                          text=True).stdout.strip()


def wait_for(what, check, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def start_relay(binary, db_url, sink_port, port, workdir):
    config = os.path.join(workdir, "queuebox.yml")
    with open(config, "w") as f:
        f.write(f"""database:
  type: postgresql
  url: {db_url}
server:
  address: 127.0.0.1
  httpPort: {port}
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 50
inbox:
  relay:
    pollIntervalMs: 50
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: $.type
admin:
  enabled: true
  auth:
    type: bearer
    token: {TOKEN}
routes:
  - topicPattern: "payment.**"
    destination: payments-web
  - topicPattern: "**"
    destination: orders-web
destinations:
  orders-web:
    type: http
    baseUrl: http://127.0.0.1:{sink_port}
    path: /hook
  payments-web:
    type: http
    baseUrl: http://127.0.0.1:{sink_port}
    path: /ok
logging:
  format: json
  level: warn
""")
    log = open(os.path.join(workdir, "relay.log"), "w")
    relay = subprocess.Popen([binary, "--config", config, "run"], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return urllib.request.urlopen(base + "/health/live", timeout=1).status == 200
        except OSError:
            return False
    wait_for("the relay to listen", ready)
    return relay, base


def insert(db_url, topic, payload):
    return psql(db_url, "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ("
                f"'{topic}', 'k-{topic}', '{payload}'::jsonb, 1) RETURNING id")


def webhook(base, event):
    """POSTs a webhook to the stripe source; its X-Api-Key is stored and shown redacted."""
    request = urllib.request.Request(base + "/inbox/stripe", data=json.dumps(event).encode(),
                                     headers={"Content-Type": "application/json",
                                              "X-Api-Key": "webhook-s3cret"})
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 202, answer.status
        return json.load(answer)["messageId"]


def alert(driver):
    from selenium.common.exceptions import NoAlertPresentException
    try:
        return driver.switch_to.alert
    except NoAlertPresentException:
        return None


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-proxy-server"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)  # not WebDriver's 300 s: a stuck load fails in the test
    return driver


def run(driver, base, db_url, shots):
    from selenium.webdriver.common.by import By

    def find(css, timeout=10):
        return wait_for(css, lambda: driver.find_elements(By.CSS_SELECTOR, css), timeout)[0]

    def shot(name):
        if shots:
            driver.save_screenshot(os.path.join(shots, name + ".png"))

    # A wrong token is refused and nothing is shown.
    driver.get(base + "/admin/console/#view=overview&token=wrong")
    error = find('#error[data-error="auth"]')
    assert "refused" in error.text, error.text
    assert driver.find_elements(By.CSS_SELECTOR, "[data-count]") == []

    # The token in the fragment is kept and removed from the address bar.
    driver.get(base + "/admin/console/#view=overview&token=" + TOKEN)
    dead_count = find('[data-count="dead"]')
    assert "token" not in driver.current_url, driver.current_url
    wait_for("3 dead rows", lambda: driver.find_element(
        By.CSS_SELECTOR, '[data-count="dead"]').text == "3" or driver.refresh())
    shot("overview")

    # The dead rows with their reasons; the hostile payload's row among them.
    driver.get(base + "/admin/console/#view=dead")
    rows = wait_for("dead rows", lambda: driver.find_elements(By.CSS_SELECTOR, "tr[data-message-id]"))
    assert len(rows) == 3, len(rows)
    assert all("HTTP 500" in r.text or "500" in r.text for r in rows), [r.text for r in rows]
    shot("dead")

    # Filter: one topic.
    driver.get(base + "/admin/console/#view=dead&topic=user.created")
    rows = wait_for("filtered rows", lambda: [r for r in driver.find_elements(
        By.CSS_SELECTOR, "tr[data-message-id]") if "user.created" in r.text])
    assert len(driver.find_elements(By.CSS_SELECTOR, "tr[data-message-id]")) == 1

    # One message: its payload as text (nothing ran), its attempts.
    hostile_id = psql(db_url, "SELECT id FROM outbox WHERE topic = 'user.created'")
    driver.get(base + "/admin/console/#view=message&id=" + hostile_id)
    payload = find('pre[data-field="payload"]')
    assert "onerror" in payload.text and "<script>" in payload.text, payload.text
    assert driver.execute_script("return window.qbPwned === undefined")
    assert driver.find_elements(By.CSS_SELECTOR, "main img, main script") == []
    attempts = find('tr[data-attempt="dead"]')
    assert "500" in attempts.text, attempts.text
    shot("message")

    # Replay it (the destination answers 200 now) and see it sent.
    Sink.failing = False
    find('[data-message-id] [data-action="replay"]').click()
    wait_for("the confirmation", lambda: alert(driver)).accept()
    wait_for("the row sent", lambda: psql(
        db_url, f"SELECT state FROM outbox WHERE id = '{hostile_id}'") == "sent")
    driver.get(base + "/admin/console/#view=message&id=" + hostile_id)
    wait_for("sent shown", lambda: "State: sent" in find('[data-field="summary"]').text or
             driver.refresh())
    find('tr[data-attempt="sent"]')
    run_inbox(driver, base, db_url, find, shot)


def run_inbox(driver, base, db_url, find, shot):
    """The inbox: its list, the lookup by source + idempotency key leading to the outbox row, one
    inbox row with its hostile payload as text and a secret header redacted, discarding a dead
    row. The webhooks were stored (and forwarded or made dead) before the browser started."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    forwarded = psql(db_url, "SELECT id FROM inbox WHERE idempotency_key = 'evt_console_1'")
    dead = psql(db_url, "SELECT id FROM inbox WHERE idempotency_key = 'evt_console_2'")
    outbox_id = psql(db_url, f"SELECT id FROM outbox WHERE headers->>'x-inbox-id' = '{forwarded}'")

    def listed():
        return driver.find_elements(By.CSS_SELECTOR, "tr[data-message-id]")

    driver.get(base + "/admin/console/#view=inbox&source=stripe")
    rows = wait_for("inbox rows", lambda: len(listed()) == 2 and listed())
    states = {r.get_attribute("data-message-id"): r.get_attribute("data-state") for r in rows}
    assert states == {forwarded: "processed", dead: "dead"}, states
    dead_row = driver.find_element(By.CSS_SELECTOR, f'tr[data-message-id="{dead}"]')
    assert "topic" in dead_row.text, dead_row.text
    driver.get(base + "/admin/console/#view=inbox&source=stripe&state=dead")
    wait_for("the dead filter", lambda: [r.get_attribute("data-message-id") for r in listed()]
             == [dead])
    driver.get(base + "/admin/console/#view=inbox&source=stripe")
    find(f'tr[data-message-id="{forwarded}"]')
    shot("inbox")

    # The lookup by source + the provider's event id, typed into the form, finds the row and the
    # outbox row it became; its link opens that row.
    driver.find_element(By.CSS_SELECTOR, '[data-lookup="source"]').send_keys("stripe")
    key = driver.find_element(By.CSS_SELECTOR, '[data-lookup="idempotencyKey"]')
    key.send_keys("evt_console_1", Keys.ENTER)
    link = find("[data-forwarded-to]")
    assert link.get_attribute("data-forwarded-to") == outbox_id, link.get_attribute("outerHTML")
    assert "view=inbox-lookup" in driver.current_url, driver.current_url
    find(f'section[data-view="inbox-lookup"] tr[data-message-id="{forwarded}"]')
    shot("lookup")
    link.click()
    summary = find(f'[data-message-id="{outbox_id}"] [data-field="summary"]')
    assert "payment.succeeded" in summary.text and "payments-web" in summary.text, summary.text
    find('[data-field="inbox-row"]')
    driver.get(base + "/admin/console/#view=inbox-lookup&source=stripe&idempotencyKey=evt_none")
    find('[data-field="lookup-none"]')

    # One inbox row: the hostile payload is text, nothing ran; the secret header is redacted.
    driver.get(base + "/admin/console/#view=inbox-message&id=" + forwarded)
    payload = find('pre[data-field="payload"]')
    assert "onerror" in payload.text and "<script>" in payload.text, payload.text
    assert driver.execute_script("return window.qbPwned === undefined")
    assert driver.find_elements(By.CSS_SELECTOR, "main img, main script") == []
    headers = find('pre[data-field="headers"]').text
    assert "[REDACTED]" in headers and "webhook-s3cret" not in headers, headers
    find(f'[data-field="forwarded-to"] [data-forwarded-to="{outbox_id}"]')
    shot("inbox-message")

    # The dead row: its failed forward in the attempts, discarded after the confirmation.
    driver.get(base + "/admin/console/#view=inbox-message&id=" + dead)
    discard = find(f'[data-message-id="{dead}"] [data-action="discard"]')
    attempt = find('tr[data-attempt="dead"]')
    assert "rendered empty" in attempt.text, attempt.text
    discard.click()
    wait_for("the confirmation", lambda: alert(driver)).accept()
    find('section[data-view="inbox"]')
    assert psql(db_url, f"SELECT count(*) FROM inbox WHERE id = '{dead}'") == "0"


def main():
    if len(sys.argv) < 2:
        print("usage: console_browser_test.py <queuebox binary>")
        return 2
    # Where it hung, before CTest's TIMEOUT (120 s) kills it.
    faulthandler.dump_traceback_later(100, exit=True)
    pg_url = os.environ.get("QB_TEST_PG_URL")
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("SKIP: python3-selenium is not installed")
        return SKIP
    if not pg_url or not os.path.exists("/usr/bin/chromium") or \
            not os.path.exists("/usr/bin/chromedriver"):
        print("SKIP: needs QB_TEST_PG_URL, chromium and chromium-driver")
        return SKIP
    name = f"qb_console_browser_{os.getpid()}"
    psql(pg_url, f"CREATE DATABASE {name}")
    db_url = urllib.parse.urlunparse(urllib.parse.urlparse(pg_url)._replace(path="/" + name))
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    relay = driver = None
    try:
        with tempfile.TemporaryDirectory() as workdir:
            relay, base = start_relay(sys.argv[1], db_url, sink.server_address[1], free_port(),
                                      workdir)
            insert(db_url, "order.created", '{"n":1}')
            insert(db_url, "order.created", '{"n":2}')
            insert(db_url, "user.created", json.dumps({"name": HOSTILE}).replace("'", "''"))
            # One webhook forwarded (its topic routes to /ok), one made dead (no event type:
            # its topic renders empty).
            webhook(base, {"id": "evt_console_1", "type": "payment.succeeded", "note": HOSTILE})
            webhook(base, {"id": "evt_console_2"})
            wait_for("3 dead rows, the forwarded webhook sent, the other dead", lambda: psql(
                db_url, "SELECT (SELECT count(*) FROM outbox WHERE state = 'dead') || ' ' || "
                "(SELECT count(*) FROM outbox WHERE state = 'sent') || ' ' || "
                "(SELECT count(*) FROM inbox WHERE state = 'dead')") == "3 1 1")
            driver = browser()
            run(driver, base, db_url, os.environ.get("QB_CONSOLE_SCREENSHOTS"))
    finally:
        if driver:
            driver.quit()
        if relay:
            relay.terminate()
            relay.wait(10)
        sink.shutdown()
        psql(pg_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    print("PASS: the console in chromium")
    return 0


if __name__ == "__main__":
    sys.exit(main())
