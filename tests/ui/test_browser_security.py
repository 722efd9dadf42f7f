"""The UI in headless Chromium under the master's Content-Security-Policy: the pages and their plotly charts work,
an injected script does not run, the login page sends users only to paths of this master, and "Log out" revokes
the token on the master."""
import re
from typing import Any, Dict, Iterator, List

import httpx
import pytest

from determined.master.security import web_security
from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow

# next= values that must not leave the master (the browser reads `\` as `/` and drops tabs and newlines)
OFF_SITE = ["//evil.example/x", "/\\evil.example/x", "/\\/evil.example", "\\\\evil.example", "/\t/evil.example",
            "/\n/evil.example", "https://evil.example/", "https:evil.example", "javascript:alert(1)",
            "%2F%2Fevil.example", "/./\\evil.example", "//%65vil.example", " /\\evil.example"]


@pytest.fixture(scope="module")
def webgl_browser(browser: Any) -> Iterator[Any]:
    """Chromium with WebGL in software (SwiftShader): plotly's parallel coordinates draw with it, and compile their
    shaders with `new Function`, which the policy must allow. (The other browser tests go without WebGL.)"""
    args = [a for a in CHROMIUM_ARGS if a != "--disable-gpu"] + ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
    webgl = browser.browser_type.launch(executable_path=CHROMIUM, headless=True, args=args)
    try:
        yield webgl
    finally:
        webgl.close()


def test_pages_and_charts_work_under_the_policy_and_injected_scripts_do_not_run(ui_master: Dict[str, Any],
                                                                              webgl_browser: Any) -> None:
    url, asha = ui_master["url"], ui_master["asha"]
    context = webgl_browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    violations: List[str] = []  # what the browser refused under the policy (it says so on the console)
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        response = page.goto(f"{url}/experiments/{asha}")
        headers = response.headers
        assert headers["content-security-policy"] == web_security.CONTENT_SECURITY_POLICY
        assert (headers["x-frame-options"], headers["x-content-type-options"]) == ("DENY", "nosniff")
        assert headers["referrer-policy"] == "no-referrer"
        script_src = re.search(r"script-src ([^;]*)", headers["content-security-policy"]).group(1)
        assert "'unsafe-inline'" not in script_src and "frame-ancestors 'none'" in headers["content-security-policy"]
        # the WebGL chart drew (tests/ui/test_browser.py checks the others, which need nothing more of the policy)
        page.wait_for_selector("#hp-parcoords .main-svg", timeout=30000)
        assert "WebGL is not supported" not in page.inner_text("#hp-parcoords")
        assert page.evaluate("() => document.querySelectorAll('#hp-parcoords canvas').length") > 0
        # the page holds no inline script but its JSON settings, which the scripts read
        assert page.evaluate("() => Array.from(document.scripts).filter(s => !s.src).map(s => s.type)") == [
            "application/json"]
        assert page.evaluate("() => window.DET_UI.experimentId") == asha
        assert violations == []
        # a script that an injection would add does not run, and the browser says why
        with page.expect_console_message(lambda m: "Content Security Policy" in m.text):
            page.evaluate("() => { const s = document.createElement('script'); s.textContent = 'window.pwned = 1';"
                          " document.body.appendChild(s); }")
        assert page.evaluate("() => window.pwned") is None
        assert len(violations) == 1 and "inline script" in violations[0], violations
    finally:
        context.close()


def test_login_sends_users_only_to_paths_of_this_master(ui_master: Dict[str, Any], browser: Any) -> None:
    url = ui_master["url"]
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{url}/login")
        page.wait_for_selector("#login-form")
        kept = page.evaluate("(values) => values.map(v => det.sameOriginPath(v))", OFF_SITE)
        assert kept == ["/"] * len(OFF_SITE), dict(zip(OFF_SITE, kept))
        for same in ("/experiments/1?x=1#top", "/%2F/evil", "/models/%5C"):  # paths of this master, as given
            assert page.evaluate("(v) => det.sameOriginPath(v)", same) == same
        # the attack of the issue, as a user meets it: log in from a link with next=/\evil.example/x
        page.goto(f"{url}/login?next=/%5Cevil.example/x")
        page.fill("#username", "determined")
        page.click("#login-submit")
        page.wait_for_url(f"{url}/", timeout=10000)
        page.goto(f"{url}/login?next=%2Fmodels")
        page.click("#login-submit")
        page.wait_for_url(f"{url}/models", timeout=10000)
    finally:
        context.close()


def test_log_out_revokes_the_token_on_the_master(ui_master: Dict[str, Any], browser: Any) -> None:
    url = ui_master["url"]
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{url}/models")
        page.wait_for_selector("#logout:not(.hidden)", timeout=20000)
        token = page.evaluate("() => localStorage.getItem('det_token')")
        me = httpx.get(f"{url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert me.status_code == 200 and me.json()["user"]["username"] == "determined"
        page.click("#logout")
        page.wait_for_url(re.compile(r".*/login$"), timeout=10000)
        assert page.evaluate("() => localStorage.getItem('det_token')") is None
        # a copy of the token (a shared machine, a saved HAR file) no longer works
        assert httpx.get(f"{url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code == 401
    finally:
        context.close()
