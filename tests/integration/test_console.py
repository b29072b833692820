"""The web console (/ui, docs/CONSOLE.md) in a real browser against `gpusched up`.

Headless Chromium (browser.py) drives the page against two mock nodes of four
H100s each, with tokens for the admin and for two tenants (alice: team-a,
bob: team-b): logging in (a refused token shows the server's reason), the
GPU grid with the pods that hold each GPU, a pending pod's explain
diagnosis, a pod going from Pending to Running on its page without a reload,
a tenant not seeing the other tenant's pods anywhere, the keyboard, the
labels and the text contrast; and, at a smaller size than bench/console.py,
the first paint of the grid and the delay of a live update. Each step saves
a screenshot under $GS_ARTIFACTS that is checked for content (size, pixel
variance) together with the DOM facts at the same moment.
"""
import json
import pathlib
import re
import secrets
import sys
import time

import pytest
import requests

from browser import assert_not_blank, browser_log, chrome, screenshot
from stack import Server, Stack, apply, phase, pod_manifest, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import console as harness  # noqa: E402  bench/console.py: the scale fill and the in-page timers

TOKENS = {"admin": secrets.token_hex(16), "alice": secrets.token_hex(16), "bob": secrets.token_hex(16),
          "wrong": secrets.token_hex(16)}


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("console"))
    s.data.mkdir(parents=True)
    (s.data / "tokens.csv").write_text(
        "# token,user,groups,namespaces,role\n"
        f"{TOKENS['admin']},admin,system:masters,,admin\n"
        f"{TOKENS['alice']},alice,dev,team-a,tenant\n"
        f"{TOKENS['bob']},bob,dev,team-b,tenant\n")
    (s.data / "tokens.csv").chmod(0o600)
    run = s.dir / "reports" / "run-1"  # a stored simulator run for #/reports
    run.mkdir(parents=True)
    (run / "report.html").write_text("<html><head><style>h1 { color: rgb(1, 2, 3) }</style></head>"
                                     "<body><h1 id=title>simulator run one</h1>"
                                     "<script>document.title='script ran'</script></body></html>")
    s.up("2x4xH100-80GB", "--ui-reports", str(s.dir / "reports"))
    apply(s, ns("team-a"), ns("team-b"))
    apply(s, pod_manifest("holder", "sleep 600", gpus=2, ns="team-a"),
          pod_manifest("other", "sleep 600", gpus=1, ns="team-b"),
          pod_manifest("too-big", "true", gpus=16, ns="team-a"),
          pod_manifest("b-too-big", "true", gpus=16, ns="team-b"))
    for name, space in (("holder", "team-a"), ("other", "team-b")):
        wait_for(lambda: phase(s.pod(name, space)) == "Running", 30, f"{space}/{name} to run")
    for name, space in (("too-big", "team-a"), ("b-too-big", "team-b")):
        wait_for(lambda: (s.pod(name, space) or {}).get("status", {}).get("conditions"), 30,
                 f"{space}/{name} to be found unschedulable")
    yield s
    s.stop_all()


def api(stack, method, path, token=None, **kw):
    return requests.request(method, stack.info["server"] + path, verify=str(stack.data / "ca.crt"), timeout=20,
                            headers={"Authorization": "Bearer " + (token or TOKENS["admin"])}, **kw)


def gpu_indices(stack, pod):
    """{node: [GPU index]} the pod holds, from its gpusched.io/devices and its node's status.devices."""
    node = pod["spec"]["nodeName"]
    uuids = pod["metadata"]["annotations"]["gpusched.io/devices"].split(",")
    by_uuid = {d["uuid"]: d["index"] for d in stack.node(node)["status"]["devices"]}
    return node, sorted(by_uuid[u] for u in uuids)


def ui(stack, route=""):
    return stack.info["server"] + "/ui/" + route


@pytest.fixture
def browser():
    with chrome(accept_insecure_certs=True) as d:
        yield d


def login(d, stack, who="admin", route="#/nodes"):
    d.get(ui(stack, "#/login"))
    box = wait_for(lambda: d.find_elements("css selector", "#token"), 15, "the login form")[0]
    box.send_keys(TOKENS[who])
    d.find_element("css selector", "#login").click()
    wait_for(lambda: who in text(d, "#whoami"), 15, f"#whoami to show {who}")
    if route:
        d.get(ui(stack, route))
    wait_for(lambda: attr(d, "#live", "data-state") == "connected", 15, "#live to be connected")


def els(d, css):
    return d.find_elements("css selector", css)


def text(d, css):
    e = els(d, css)
    return e[0].text if e else ""


def attr(d, css, name):
    e = els(d, css)
    return e[0].get_attribute(name) if e else None


def cells(d, node):
    """{gpu index: (data-holders, data-health, aria-label)} of a node's GPU cells in the DOM."""
    got = d.execute_script(
        "return Array.from(document.querySelectorAll('[data-node=\"' + arguments[0] + '\"][data-gpu]'))"
        ".map(e => [e.dataset.gpu, e.dataset.holders, e.dataset.health, e.getAttribute('aria-label') || '']);",
        node)
    return {int(g): (h, health, label) for g, h, health, label in got}


def filter_nodes(d, name):
    box = els(d, "#node-filter")[0]
    box.clear()
    box.send_keys(name)


def shot(d, name, **facts):
    """A screenshot that shows something; facts: DOM checks already made at this moment, printed with it."""
    path = screenshot(d, name)
    assert_not_blank(path)
    print(f"{path}: {facts}")
    return path


def test_a_refused_token_shows_the_reason_and_stays_on_login(stack, browser):
    d = browser
    d.get(ui(stack, "#/nodes"))  # no token stored: any route shows the login form
    wait_for(lambda: els(d, "#token"), 15, "the login form on #/nodes without a token")
    label = els(d, "label[for=token]")
    assert label and label[0].text.strip() == "Token"
    assert attr(d, "#token", "type") == "password"
    els(d, "#token")[0].send_keys(TOKENS["wrong"])
    els(d, "#login")[0].click()
    err = wait_for(lambda: text(d, "#login-error").strip(), 15, "#login-error")
    # the server's own reason for the refusal, not a message of the page's own
    reason = api(stack, "GET", "/api/v1/namespaces", token=TOKENS["wrong"])
    assert reason.status_code == 401
    assert reason.json()["message"] in err, f"#login-error {err!r} lacks the server's {reason.json()['message']!r}"
    assert d.execute_script("return sessionStorage.getItem('gpusched.token')") is None
    shot(d, "console-login-refused", error=err)


def test_a_report_opens_in_the_page_after_login(stack, browser):
    d = browser
    # the report itself is refused without the token: the page must send it
    assert requests.get(ui(stack, "reports/run-1/report.html"), verify=str(stack.data / "ca.crt"),
                        timeout=20).status_code == 401
    login(d, stack, route="#/reports/run-1")
    frame = wait_for(lambda: els(d, "iframe#report-frame"), 15, "the report's frame")[0]
    src, sandbox = frame.get_attribute("src"), frame.get_attribute("sandbox")
    assert src.startswith("blob:"), f"the report frame's src {src!r} is not a blob: URL"
    assert sandbox == "", f"the report frame's sandbox {sandbox!r} allows something"
    assert frame.get_attribute("title") == "Simulator report of run run-1"
    d.switch_to.frame(frame)
    try:
        title = wait_for(lambda: text(d, "#title"), 15, "the report's heading in its frame")
        ran = d.execute_script("return document.title")
    finally:
        d.switch_to.default_content()
    assert title == "simulator run one"
    assert ran != "script ran", "a script of the report ran in the console"
    assert [e.text for e in els(d, "#view li a")] == ["run-1"]
    shot(d, "console-report", title=title, src=src[:5])


def test_the_grid_shows_who_holds_each_gpu(stack, browser):
    d = browser
    login(d, stack)
    holder = stack.pod("holder", "team-a")
    node, held = gpu_indices(stack, holder)
    other = stack.pod("other", "team-b")
    onode, oheld = gpu_indices(stack, other)
    filter_nodes(d, node)
    got = wait_for(lambda: (lambda c: c if len(c) == 4 and all(c[g][0] == "team-a/holder" for g in held) else None)(
        cells(d, node)), 15, f"the cells of {node} with their holders")
    for g in range(4):
        holders, health, label = got[g]
        want = "team-a/holder" if g in held else ("team-b/other" if node == onode and g in oheld else "")
        assert holders == want, f"{node} GPU {g}: data-holders {holders!r}, want {want!r}"
        assert health == "Healthy", f"{node} GPU {g}: data-health {health!r}"
        assert label, f"{node} GPU {g} has no aria-label"
        if want:
            assert want in label, f"{node} GPU {g}: aria-label {label!r} does not name {want}"
    # the filter narrows the grid to the node asked for
    assert [e.get_attribute("data-node") for e in els(d, "[data-node]:not([data-gpu])")] == [node]
    shot(d, "console-grid", node=node, held=held)


def test_a_pending_pod_shows_its_explain_reason(stack, browser):
    d = browser
    login(d, stack, route="#/pending")
    row = wait_for(lambda: els(d, '[data-pod="team-a/too-big"]'), 15, "the pending row of team-a/too-big")[0]
    assert not els(d, '[data-pod="team-a/holder"]'), "a running pod is listed as pending"
    shot(d, "console-pending", rows=len(els(d, "[data-pod]")))
    link = row if row.tag_name == "a" else row.find_element("css selector", "a")
    link.click()
    wait_for(lambda: d.current_url.endswith("#/pods/team-a/too-big"), 10, "the pod page of team-a/too-big")
    report = api(stack, "GET", "/api/v1/namespaces/team-a/pods/too-big/explain").json()["report"]
    lines = [l.strip() for l in report.splitlines() if l.strip()]
    reason = wait_for(lambda: text(d, "#pod-reason").strip(), 15, "#pod-reason")
    assert "Insufficient nvidia.com/gpu" in reason, reason
    assert any(l in reason for l in lines), f"#pod-reason {reason!r} shows no line of the explain report {lines}"
    assert text(d, "#pod-phase") == "Pending"
    for part in ("#pod-eta", "#pod-events", "#pod-devices", "#pod-logs"):
        assert els(d, part), f"the pod page has no {part}"
    shot(d, "console-pod-pending", reason=reason[:80])


def test_a_pod_goes_from_pending_to_running_without_reload(stack, browser):
    d = browser
    # a blocker holds a GPU of one node; the late pod wants every GPU left there plus that one
    apply(stack, pod_manifest("blocker", "sleep 600", gpus=1))
    b = wait_for(lambda: (lambda p: p if phase(p) == "Running" else None)(stack.pod("blocker")), 30, "blocker to run")
    node = b["spec"]["nodeName"]
    held = sum(len(p["metadata"].get("annotations", {}).get("gpusched.io/devices", "").split(","))
               for p in stack.pods() if p["spec"].get("nodeName") == node and phase(p) in ("Pending", "Running")
               and p["metadata"].get("annotations", {}).get("gpusched.io/devices"))
    want = 4 - held + 1
    late = pod_manifest("late", "sleep 600", gpus=want)
    late["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    apply(stack, late)
    wait_for(lambda: (stack.pod("late") or {}).get("status", {}).get("conditions"), 30, "late to be unschedulable")
    login(d, stack, route="#/pods/default/late")
    wait_for(lambda: text(d, "#pod-phase") == "Pending", 15, "#pod-phase Pending")
    d.execute_script("window.__gsNoReload = 42;")
    shot(d, "console-pod-before", phase="Pending")
    stack.cli("delete", "pod", "blocker")
    wait_for(lambda: text(d, "#pod-phase") == "Running", 40, "#pod-phase to turn Running live")
    assert d.execute_script("return window.__gsNoReload") == 42, "the page was reloaded"
    assert phase(stack.pod("late")) == "Running"
    shot(d, "console-pod-running", phase="Running")
    stack.cli("delete", "pod", "late")


def test_a_tenant_sees_only_its_namespaces(stack, browser):
    d = browser
    login(d, stack, who="alice")
    node, held = gpu_indices(stack, stack.pod("holder", "team-a"))
    onode, _ = gpu_indices(stack, stack.pod("other", "team-b"))
    for n in sorted({node, onode}):
        filter_nodes(d, n)
        wait_for(lambda: len(cells(d, n)) == 4, 15, f"the cells of {n}")
    filter_nodes(d, node)
    wait_for(lambda: all(cells(d, node)[g][0] == "team-a/holder" for g in held), 15, "alice's own pod in the grid")
    filter_nodes(d, onode)
    c = wait_for(lambda: cells(d, onode) if len(cells(d, onode)) == 4 else None, 15, f"the cells of {onode}")
    assert not any("team-b" in h or "team-b" in label for h, _, label in c.values()), c
    shot(d, "console-tenant-grid", node=onode)
    d.get(ui(stack, "#/pending"))
    wait_for(lambda: els(d, '[data-pod="team-a/too-big"]'), 15, "alice's pending pod")
    assert not els(d, '[data-pod^="team-b/"]'), "team-b's pods are listed for alice"
    assert "team-b" not in d.find_element("css selector", "body").text
    shot(d, "console-tenant-pending")
    d.get(ui(stack, "#/pods/team-b/other"))
    msg = wait_for(lambda: "forbidden" in d.find_element("css selector", "body").text.lower() and
                   d.find_element("css selector", "body").text, 15, "a forbidden message on team-b's pod page")
    assert "sleep 600" not in msg and text(d, "#pod-phase") != "Running", msg
    shot(d, "console-tenant-forbidden", message=msg[:120])


# The nav links, the filter and the login controls: what a keyboard user must reach.
FOCUS_JS = """
const e = document.activeElement;
if (!e || e === document.body) return null;
const s = getComputedStyle(e);
return {id: e.id, href: e.getAttribute('href') || '', tag: e.tagName,
        outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0,
        shadow: s.boxShadow && s.boxShadow !== 'none'};
"""


def test_keyboard_reaches_filter_and_nav_with_visible_focus(stack, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    d = browser
    login(d, stack)
    wait_for(lambda: els(d, "#node-filter"), 15, "the node filter")
    d.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
    reached = {}
    for _ in range(80):
        ActionChains(d).send_keys(Keys.TAB).perform()
        f = d.execute_script(FOCUS_JS)
        if not f:
            continue
        key = "#" + f["id"] if f["id"] == "node-filter" else f["href"]
        if key in ("#node-filter", "#/nodes", "#/queues", "#/pending") and key not in reached:
            reached[key] = f
            if key == "#node-filter":
                shot(d, "console-focus-filter", focused=f)
        if len(reached) == 4:
            break
    assert set(reached) == {"#node-filter", "#/nodes", "#/queues", "#/pending"}, f"Tab reached only {reached}"
    for key, f in reached.items():
        assert f["outline"] or f["shadow"], f"{key} has no visible focus (outline or box-shadow): {f}"
    nav = d.execute_script("return Array.from(document.querySelectorAll('nav a')).map(a => a.getAttribute('href'))")
    assert {"#/nodes", "#/queues", "#/pending"} <= set(nav), nav


UNLABELLED_JS = """
return Array.from(document.querySelectorAll('input, select, textarea')).filter(e => {
  if (e.type === 'hidden') return false;
  if (e.getAttribute('aria-label') || e.getAttribute('aria-labelledby')) return false;
  if (e.id && document.querySelector('label[for="' + e.id + '"]')) return false;
  return !e.closest('label');
}).map(e => e.outerHTML.slice(0, 120));
"""

# WCAG 2 contrast of every element that shows text of its own, against the first opaque
# background among it and its ancestors (white when none is).
CONTRAST_JS = """
function rgb(c) { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
  const v = m[1].split(',').map(parseFloat); return {r: v[0], g: v[1], b: v[2], a: v.length > 3 ? v[3] : 1}; }
function lum(c) { const f = x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); }
function bg(e) { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor);
  if (c && c.a > 0.5) return c; } return {r: 255, g: 255, b: 255, a: 1}; }
const out = [];
for (const e of document.querySelectorAll('body *')) {
  const own = Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
  if (!own || !e.getClientRects().length) continue;
  const s = getComputedStyle(e);
  if (s.visibility === 'hidden' || parseFloat(s.opacity) === 0) continue;
  const fg = rgb(s.color), b = bg(e);
  const l1 = lum(fg), l2 = lum(b);
  out.push({text: e.textContent.trim().slice(0, 40), tag: e.tagName,
            ratio: (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05), color: s.color,
            background: 'rgb(' + b.r + ',' + b.g + ',' + b.b + ')'});
}
return out;
"""


@pytest.mark.parametrize("route", ["#/login", "#/nodes", "#/pending", "#/queues", "#/pods/team-a/too-big"])
def test_inputs_are_labelled_and_text_has_contrast(stack, browser, route):
    d = browser
    if route == "#/login":
        d.get(ui(stack, route))
        wait_for(lambda: els(d, "#token"), 15, "the login form")
    else:
        login(d, stack, route=route)
        time.sleep(1)  # the route's data arrives over the watch
    assert not d.execute_script(UNLABELLED_JS), f"{route}: inputs without a label"
    texts = d.execute_script(CONTRAST_JS)
    assert texts, f"{route}: no text on the page"
    low = [t for t in texts if t["ratio"] < 4.5]
    assert not low, f"{route}: text below 4.5:1 contrast: {low[:5]}"


def test_queues_show_usage_against_nominal_quota(stack, browser):
    d = browser
    apply(stack, {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "h100"}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "research"},
           "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
               {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 6}]}]}]}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "research"}})
    queued = pod_manifest("queued", "sleep 600", gpus=1, ns="team-a")
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    apply(stack, queued)
    wait_for(lambda: phase(stack.pod("queued", "team-a")) == "Running", 30, "the queued pod to be admitted and run")
    login(d, stack, route="#/queues")
    q = wait_for(lambda: (lambda e: e if e and re.search(r"\b1 / 6 GPUs", e[0].text) else None)(
        els(d, '[data-queue="research"]')), 20, "the research queue with 1 of its 6 GPUs used")[0]
    shot(d, "console-queues", queue=q.text[:80])
    stack.cli("delete", "pod", "queued", "-n", "team-a")


def test_a_blank_screenshot_is_refused(browser):
    """The screenshot check above is not vacuous: an empty white page fails it."""
    browser.get("data:text/html,<body style='background:#fff'></body>")
    path = screenshot(browser, "console-blank-check")
    with pytest.raises(AssertionError, match="looks blank"):
        assert_not_blank(path)


def test_first_paint_and_live_update_at_small_scale(gpusched_bin, tmp_path):
    """bench/console.py at 500 nodes / 5,000 pods (the full 5,000 / 50,000 is bench/RESULTS.md, "Console")."""
    srv = Server(gpusched_bin, tmp_path / "srv", env={"GPUSCHED_NODE_GRACE": "86400"}).start()
    try:
        harness.fill(srv.url, srv.token, str(srv.data / "ca.crt"), nodes=500, pods=5000, pending=100)
        with chrome(accept_insecure_certs=True) as d:
            r = harness.measure(d, srv.url, srv.token, str(srv.data / "ca.crt"))
            shot(d, "console-scale-500", **r)
        print(json.dumps(r))
        # How fast is bench/console.py's to say (bench/RESULTS.md); here only bounds that a page which
        # paints and follows its watch meets on a loaded machine too (the updates come only through
        # the watch: nothing polls), several times what this scale takes on an idle one.
        assert r["first_paint_ms"] <= 8000, r
        assert r["update_health_ms"] <= 4000 and r["update_holder_ms"] <= 4000, r
        assert r["dom_cells"] < 500 * 8, f"the grid is not virtualised: {r['dom_cells']} cells in the DOM"
    except Exception:
        print(srv.log()[-3000:])
        raise
    finally:
        srv.stop()


def test_browser_log_reads_the_page_console(browser):
    """browser_log(), printed when a console test fails, has what the page logged."""
    browser.get("data:text/html,<script>console.error('gs-marker')</script>")
    assert "gs-marker" in browser_log(browser)
