"""The live dashboard of ``mss aggregate --http``: its JSON API and /metrics over
real HTTP, the OpenAPI document, the token, and the page itself rendered in
real headless Chromium (Debian's, driven by Playwright) showing the current
estimates as reports arrive, without reloading.  The browser test writes
build/screenshots/dashboard.png for people to look at."""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, clocked, estimate_json, wait_for
from loadgen import make_reports, publish
from mss_aggregator.collect.link_health import CAUSES
from mss_aggregator.ports import free_port, free_ports
from mss_protocol.mss.config import MssConfig

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
ROOT = Path(__file__).resolve().parent.parent


def get(url, token=None, basic=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if basic:
        req.add_header("Authorization", "Basic " + base64.b64encode(basic.encode()).decode())
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        return r.status, r.headers.get("Content-Type"), body


def get_json(url, **kw):
    return json.loads(get(url, **kw)[2])


@pytest.fixture
def dashboard(tmp_path, mosquitto):
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    port = free_port()
    store = tmp_path / "s.sqlite"
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    agg = AggregatorProcess(tmp_path, config, store, broker=broker,
                            extra=["--http", f"127.0.0.1:{port}", "--refresh", "0.3"]).start()
    url = f"http://127.0.0.1:{port}/"
    serving(url, agg)
    agg.ready()  # subscribed: the HTTP server may answer before, and reports published then find no one
    yield url, broker, store
    agg.stop()


def serving(url, agg, timeout=30):
    """Wait until the aggregator's HTTP server at ``url`` answers (it binds after start-up)."""
    deadline = time.time() + timeout
    while True:
        try:
            get(url + "api/config")
            return
        except (urllib.error.URLError, ConnectionError):
            assert time.time() < deadline and agg.proc.poll() is None, "the HTTP server never answered"
            time.sleep(0.2)


def wait_api(url, n, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        doc = get_json(url + "api/estimates")
        if doc["n"] >= n:
            return doc
        time.sleep(0.2)
    raise AssertionError(f"the API never reached {n} reports")


def _conforms(value, schema, defs):
    """The response satisfies the OpenAPI schema's types and required fields."""
    if "$ref" in schema:
        return _conforms(value, defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    py = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float),
          "boolean": bool, "null": type(None)}
    if types and not any(isinstance(value, py[t]) and not (t != "boolean" and isinstance(value, bool))
                         for t in types):
        return False
    if isinstance(value, dict):
        if not set(schema.get("required", ())) <= set(value):
            return False
        return all(_conforms(value[k], s, defs) for k, s in schema.get("properties", {}).items()
                   if k in value)
    if isinstance(value, list) and "items" in schema:
        return all(_conforms(v, schema["items"], defs) for v in value)
    return True


def test_api_metrics_and_openapi(dashboard):
    url, broker, store = dashboard
    empty = get_json(url + "api/estimates")  # before any report: valid JSON, infinite SEs as null
    assert empty["n"] == 0 and empty["estimates"][0]["stderr"] is None
    publish(make_reports(CFG, devices=300, epochs=1, prefix="d"), broker, "t")
    wait_for(store, lambda c: c["accepted"] >= 300)
    est = wait_api(url, 300)
    assert est["post"] == "simplex"  # the dashboard's default view (postprocess.DEFAULT_VIEW)
    for api, cli in ((est, estimate_json(store, "--post", "simplex")),
                     (get_json(url + "api/estimates?post=none"), estimate_json(store))):
        assert [r["estimate"] for r in api["estimates"]] == pytest.approx(
            [r["estimate"] for r in cli["estimates"]], abs=1e-12)
        assert [r["ci_low"] for r in api["estimates"]] == pytest.approx(
            [r["ci_low"] for r in cli["estimates"]], abs=1e-12)
        assert api["integrity"]["max_shift"] == pytest.approx(cli["integrity"]["max_shift"], abs=1e-15)
        assert [b for r in api["estimates"] for b in r["certified_ci"]] == pytest.approx(
            [b for r in cli["estimates"] for b in r["certified_ci"]], abs=1e-12)  # the docs' default untrusted
    assert est["config_id"] == CFG.config_id_hex
    counters = get_json(url + "api/counters")
    assert counters["counters"]["accepted"] == 300 and counters["history"][-1]["accepted"] == 300
    assert counters["devices_per_epoch"] == [{"epoch": 0, "devices": 300}]
    config = get_json(url + "api/config")
    assert config["config_id"] == CFG.config_id_hex and config["eps_effective"] <= config["epsilon"]
    assert config["bits_per_report"] == CFG.bits_per_report
    assert [a["prior"] for a in config["audit"]] == ["uniform", "current estimate"]
    assert all(a["no_information"] <= a["bayes_exact"] <= a["ceiling"] for a in config["audit"])
    assert all(a["strength"] in ("weak", "moderate", "strong") for a in config["audit"])
    dep = config["deployment"]  # the loss so far: one epoch (the store's first), no memo, no budget
    assert dep["source"] == "config" and dep["epochs"] == 1 and dep["memoize"] is False and dep["budget"] is None
    assert dep["counted_from"] == "first epoch in the store" and dep["first_epoch"] == 0
    assert [a["prior"] for a in dep["attacker"]] == ["uniform", "current estimate"]
    for a in dep["attacker"]:
        assert a["fresh_draws"] == 1 and a["epsilon_spent"] == pytest.approx(CFG.eps_effective)
        assert a["ci"][0] <= a["ceiling"] and a["strength"] in ("weak", "moderate", "strong")
    status, ctype, body = get(url + "metrics")
    assert status == 200 and ctype.startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}
    assert samples[("mss_reports_total", (("outcome", "accepted"),))] == 300
    assert samples[("mss_estimate_reports", ())] == 300
    assert samples[("mss_devices_last_epoch", ())] == 300
    broker_label = (("broker", broker.removeprefix("mqtt://")),)
    assert samples[("mss_broker_connected", broker_label)] == 1
    assert sum(v for (name, labels), v in samples.items() if name == "mss_broker_connect_failures_total") == 0
    assert counters["brokers"] == [{"broker": broker.removeprefix("mqtt://"), "tls": False, "connected": True,
                                    "connected_since": counters["brokers"][0]["connected_since"],
                                    "failures": dict.fromkeys(CAUSES, 0), "last_error": None,
                                    "last_error_at": None}]
    spec = get_json(url + "api/openapi.json")
    defs = spec["components"]["schemas"]
    for path in ("/api/estimates", "/api/counters", "/api/config"):
        schema = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert _conforms(get_json(url + path.lstrip("/")), schema, defs), path
    assert not _conforms({"n": 1}, spec["paths"]["/api/estimates"]["get"]["responses"]["200"]
                         ["content"]["application/json"]["schema"], defs)  # the checker can fail
    with pytest.raises(urllib.error.HTTPError) as err:
        get(url + "nope")
    assert err.value.code == 404


def test_loopback_names_ignore_case():
    from mss_aggregator.web.server import HttpError, check_bind
    from mss_cli.common import flag_message

    assert check_bind("LOCALHOST:8080", None) == ("LOCALHOST", 8080)  # loopback: no token needed
    with pytest.raises(HttpError, match="reachable from other hosts; give a token") as refused:
        check_bind("LOCALHOST.example:8080", None)
    assert "give --http-token" in flag_message(refused.value)  # mss aggregate --http's wording


def test_token_and_binding(tmp_path, mosquitto):
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    base = [sys.executable, "-m", "mss_cli", "aggregate", "--config", str(config), "--store",
            str(tmp_path / "s.sqlite"), "--broker", f"mqtt://127.0.0.1:{mosquitto.port}", "--quiet"]
    out = subprocess.run(base + ["--http", "0.0.0.0:8080"], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "MSS_HTTP_TOKEN"})
    assert out.returncode == 2 and "--http-token" in out.stderr  # refused before binding anything
    out = subprocess.run(base + ["--http", "nonsense"], capture_output=True, text=True)
    assert out.returncode == 2 and "HOST:PORT" in out.stderr
    port = free_port()
    agg = AggregatorProcess(tmp_path, config, tmp_path / "s.sqlite",
                            broker=f"mqtt://127.0.0.1:{mosquitto.port}",
                            extra=["--http", f"127.0.0.1:{port}", "--http-token", "s3cret"]).start()
    url = f"http://127.0.0.1:{port}/api/config"
    try:
        deadline = time.time() + 30
        while True:
            try:
                get(url)
            except urllib.error.HTTPError as exc:
                assert exc.code == 401 and exc.headers["WWW-Authenticate"].startswith("Basic")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.time() < deadline
                time.sleep(0.2)
        assert get(url, token="s3cret")[0] == 200
        assert get(url, basic="anyone:s3cret")[0] == 200
        with pytest.raises(urllib.error.HTTPError):
            get(url, token="wrong")
    finally:
        agg.stop()


def _view(tmp_path, cfg, device, epochs_ago, period=600):
    """A LiveView on an empty store whose campaign clock started ``epochs_ago`` epochs ago."""
    from mss_aggregator.collect.store import open_store
    from mss_aggregator.web.live import LiveView

    tmp_path.mkdir()
    store = open_store(tmp_path / "s.sqlite", cfg)
    origin = int(time.time()) - period // 2 - epochs_ago * period
    store.set_clock({"period_s": period, "epoch_origin": origin, "accept_past_epochs": 32})
    store.close()
    device = None if device is None else dict(device, period_s=period, epoch_origin=origin)
    return LiveView(tmp_path / "s.sqlite", interval=60, device=device)


def test_privacy_panel_loss_so_far(tmp_path):
    """/api/config's deployment (API level, LiveView): epochs since epoch_origin, fresh draws
    as the device section says (every epoch; one with memoize; B a window with a budget),
    the attacker's success at that horizon under the ceiling at the epsilon spent, and the
    verdict: 100 fresh MSS reports give a value away (weak); the same fleet memoized stays
    at one report's success.  The demo's defaults (k = 16, epsilon 3, zipf prior: the
    single-report best attacker near 0.5) are called weak."""
    from mss_aggregator.distributions import parse
    from mss_aggregator.privacy import ceilings
    from mss_protocol import registry
    from mss_protocol.budget import budget_section

    cfg = MssConfig.build(16, 2.0, [5, 7])
    fresh = _view(tmp_path / "a", cfg, {}, 99)
    dep = fresh.config_doc()["deployment"]
    fresh.close()
    assert dep["epochs"] == 100 and dep["counted_from"] == "epoch_origin" and dep["current_epoch"] == 99
    (a,) = dep["attacker"]  # no reports: the uniform prior only
    assert a["fresh_draws"] == 100 and a["epsilon_spent"] == pytest.approx(100 * cfg.eps_effective)
    assert a["success"] > 0.9 and a["strength"] == "weak" and a["ceiling"] == pytest.approx(1.0)
    memo = _view(tmp_path / "b", cfg, {"memoize": True}, 99)
    (a,) = memo.config_doc()["deployment"]["attacker"]
    memo.close()
    single = ceilings.ldp_prior(np.full(16, 1 / 16), cfg.eps_effective)
    assert a["fresh_draws"] == 1 and a["ceiling"] == pytest.approx(single) and a["ci"][0] <= single
    budget = _view(tmp_path / "c", cfg, {"budget": budget_section(4.0, 1)}, 299)  # 144 epochs a day
    dep = budget.config_doc()["deployment"]
    budget.close()
    (a,) = dep["attacker"]
    assert dep["budget"]["days"] == 1 and a["draws_per_window"] == 2 and a["fresh_draws"] == 6  # 3 windows
    assert a["ci"][0] <= ceilings.ldp_prior(np.full(16, 1 / 16), 6 * cfg.eps_effective) == pytest.approx(a["ceiling"])
    without = _view(tmp_path / "d", cfg, None, 0)  # no device section: the store's clock, memoize unknown
    dep = without.config_doc()["deployment"]
    without.close()
    assert dep["source"].startswith("campaign clock") and dep["epochs"] == 1
    prior = parse("zipf:1.1", 16)
    best = registry.make("mss", 16, 3.0).channel().bayes_exact(prior)  # the demo's planned config
    assert 0.45 < best < 0.65 and ceilings.strength(best, ceilings.no_information(prior)) == "weak"


def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing under CI (make test installs Debian's chromium as root)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return exe


def _bars(page):
    return [tuple(b) for b in page.eval_on_selector_all(
        "#chart rect.bar", "els => els.map(e => [Number(e.dataset.item), Number(e.dataset.estimate)])")]


def _one_two_five(labels):
    """Tick labels evenly spaced at 1, 2 or 5 times a power of ten, each a multiple of the step."""
    values = [float(v) for v in labels]
    assert len(values) >= 2, labels
    steps = np.diff(values)
    step = steps[0]
    assert step > 0 and np.allclose(steps, step, rtol=1e-6), labels
    mantissa = step / 10 ** np.floor(np.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-6, labels
    assert np.allclose(np.round(np.array(values) / step), np.array(values) / step, atol=1e-6), labels


def _texts(page, selector):
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")


def test_page_in_headless_chromium_shows_current_estimates(dashboard):
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    url, broker, store = dashboard
    publish(make_reports(CFG, devices=200, epochs=1, prefix="a"), broker, "t")
    wait_api(url, 200)
    shots = ROOT / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        page.wait_for_function("document.body.dataset.reports === '200'", timeout=20000)
        top = sorted(get_json(url + "api/estimates")["estimates"], key=lambda r: -r["estimate"])[:20]
        assert _bars(page) == [(r["item"], pytest.approx(r["estimate"], abs=1e-12)) for r in top]
        shown = get_json(url + "api/estimates?top=20")  # the page's view: 20 of 64 picked by their estimates
        assert shown["view"]["intervals"] == "simultaneous" and shown["estimates"] == top
        assert page.eval_on_selector_all("#chart rect.bar", "els => els.map(e => e.dataset.signal === 'true')") \
            == [r["detected_simultaneous"] for r in top]  # filled bars: distinguishable from 0, family-wise
        assert page.locator("#estimates tbody tr").count() == 20  # the table lists the chart's items
        assert "simultaneous" in page.inner_text("#view-title") and "noise alone" in page.inner_text("#caption")
        assert page.locator("#epochs-chart rect.bar").count() == 1
        assert "eps_effective" in page.inner_text("#config")
        assert page.locator("#brokers").get_attribute("data-connected") == "true"
        assert broker.removeprefix("mqtt://") in page.inner_text("#brokers")
        # more reports arrive: the page follows without a reload
        publish(make_reports(CFG, devices=200, epochs=1, prefix="b", seed=5), broker, "t")
        page.wait_for_function("document.body.dataset.reports === '400'", timeout=20000)
        top = sorted(get_json(url + "api/estimates")["estimates"], key=lambda r: -r["estimate"])[:20]
        assert _bars(page) == [(r["item"], pytest.approx(r["estimate"], abs=1e-12)) for r in top]
        page.wait_for_timeout(700)  # one more refresh so the counters chart has a history
        dep = get_json(url + "api/config")["deployment"]  # the privacy panel shows the API's verdicts
        assert page.locator("#loss td.verdict").count() == len(dep["attacker"]) == 2
        assert [c.inner_text() for c in page.locator("#loss td.verdict").all()] == [a["strength"] for a in dep["attacker"]]
        assert "memoize off, no budget" in page.inner_text("#loss-summary")
        counters = page.inner_text("#counters")  # the skip counts per link, none here
        for link in ("mqtt", "serial", "lorawan"):
            assert re.search(rf"skipped epochs \({link}\)\s+0", counters), counters
        # every chart: titled axes, y ticks at 1-2-5 steps; clock times under the counters, epochs under the bars
        for chart in ("#chart", "#counters-chart", "#epochs-chart"):
            titles = page.eval_on_selector_all(f"{chart} .axis-title", "els => els.map(e => [e.dataset.axis, e.textContent])")
            assert [a for a, _ in titles] == ["x", "y"] and all(len(text) > 3 for _, text in titles), (chart, titles)
            _one_two_five(_texts(page, f"{chart} text.y-tick"))
        assert "item" in _texts(page, "#chart .axis-title")[0]
        clock = _texts(page, "#counters-chart text.x-tick")
        assert len(clock) >= 2 and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", c) for c in clock), clock
        assert _texts(page, "#epochs-chart text.x-tick") == ["0"]
        assert _texts(page, "#epochs-chart .axis-title")[0] == "epoch"
        # the campaign the store records (mss aggregate --campaign t) heads the page and names its tab
        from mss_aggregator.collect.store import open_store

        recorded = open_store(store)
        name = recorded.campaign()
        recorded.close()
        assert get_json(url + "api/config")["campaign"] == name
        assert page.inner_text("#campaign") == (name or "unnamed campaign")
        assert page.title().startswith(name or "unnamed campaign")
        page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
        browser.close()
    assert (shots / "dashboard.png").stat().st_size > 10_000


def test_privacy_panel_says_weak_in_chromium(tmp_path):
    """A fleet of fresh MSS reports 100 epochs into its campaign: the panel's verdict
    cell says weak, in the weak colour (build/screenshots/privacy-panel.png)."""
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    from mss_aggregator.web.server import WebServer

    view = _view(tmp_path / "v", MssConfig.build(16, 2.0, [5, 7]), {}, 99)
    web = WebServer(view, f"127.0.0.1:{free_port()}").start()
    shots = ROOT / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(web.url)
            page.wait_for_selector("#loss td.verdict", timeout=20000)
            cell = page.locator("#loss td.verdict").first
            assert cell.inner_text() == "weak"
            assert cell.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(178, 24, 43)"
            assert "100 epochs of 600 s" in page.inner_text("#loss-summary")
            page.locator("#loss").locator("xpath=..").screenshot(path=str(shots / "privacy-panel.png"))
            browser.close()
    finally:
        web.stop()
        view.close()


def test_page_shows_a_broker_it_cannot_reach(tmp_path):
    """Nothing listens on the broker's port: the page says so, with the cause, while the aggregator retries."""
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    port, dead = free_ports(2)
    agg = AggregatorProcess(tmp_path, config, tmp_path / "s.sqlite", broker=f"mqtt://127.0.0.1:{dead}",
                            extra=["--http", f"127.0.0.1:{port}", "--refresh", "0.3"]).start()
    url = f"http://127.0.0.1:{port}/"
    try:
        serving(url, agg)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(url)
            page.wait_for_function("document.getElementById('status').textContent.includes('refused')",
                                   timeout=20000)
            status = page.inner_text("#status")
            table = page.inner_text("#brokers")
            browser.close()
    finally:
        agg.stop()
    assert f"broker 127.0.0.1:{dead} NOT CONNECTED: refused: [Errno 111] Connection refused" in status
    assert "NOT CONNECTED (retrying)" in table and "refused" in table


def test_top_query_host_check_and_received_metric(dashboard):
    url, broker, store = dashboard
    publish(make_reports(CFG, devices=50, epochs=1, prefix="q"), broker, "t")
    wait_api(url, 50)
    top = get_json(url + "api/estimates?top=5")["estimates"]
    everything = get_json(url + "api/estimates")["estimates"]
    assert [r["item"] for r in top] == [r["item"] for r in sorted(everything, key=lambda r: -r["estimate"])[:5]]
    with pytest.raises(urllib.error.HTTPError) as err:
        get(url + "api/estimates?top=zero")
    assert err.value.code == 400
    req = urllib.request.Request(url + "api/config", headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as err:  # DNS rebinding onto a loopback server
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 403
    port = url.rsplit(":", 1)[1].strip("/")
    for host in (f"LOCALHOST:{port}", f"LocalHost:{port}", "localhost"):  # host names ignore case
        req = urllib.request.Request(url + "api/config", headers={"Host": host})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200, host
    body = get(url + "metrics")[2].decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(body) for s in fam.samples}
    assert samples[("mss_reports_received_total", ())] == 50
    assert sum(v for (name, _), v in samples.items() if name == "mss_reports_total") == 50


def test_clean_shutdown_with_the_live_console(tmp_path, mosquitto):
    """--http beside the live counters display (no --quiet): SIGTERM stops both cleanly."""
    import signal

    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mss_cli", "aggregate", "--config", str(config),
                             "--store", str(tmp_path / "s.sqlite"), "--broker",
                             f"mqtt://127.0.0.1:{mosquitto.port}", "--http", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while True:
        try:
            get(f"http://127.0.0.1:{port}/api/config")
            break
        except (urllib.error.URLError, ConnectionError):
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped; counters" in err and "Traceback" not in err
