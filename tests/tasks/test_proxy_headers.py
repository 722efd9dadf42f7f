"""The proxy's rules on hostile input, without a task: what goes to the task and what comes back."""
from determined.master.api import proxy

TASK = "0b6c5a2e-1111-4222-8333-944455556666"


def test_the_masters_credentials_never_reach_the_task_and_its_secret_is_added() -> None:
    sent = proxy._forward_headers([
        (b"authorization", b"Bearer master-token"), (b"cookie", b"det_proxy_abc=s3cret; _xsrf=x1"),
        (b"host", b"evil.example"), (b"transfer-encoding", b"chunked"), (b"content-length", b"5"),
        (b"x-forwarded-for", b"1.2.3.4"), (b"accept", b"*/*")], TASK, "jupyter-token", 4321)
    assert (b"authorization", b"token jupyter-token") in sent
    assert not any(v == b"Bearer master-token" for _, v in sent)
    assert (b"cookie", b"_xsrf=x1") in sent and not any(b"det_proxy_" in v for _, v in sent)
    assert (b"host", b"127.0.0.1:4321") in sent and (b"host", b"evil.example") not in sent
    assert not any(k in (b"transfer-encoding", b"content-length", b"x-forwarded-for") for k, _ in sent)


def test_a_task_may_only_redirect_inside_its_own_proxy_path() -> None:
    own = f"/proxy/{TASK}/lab"
    assert proxy._answer_headers([(b"location", own.encode())], TASK, 4321) == [(b"location", own.encode())]
    assert proxy._answer_headers([(b"location", b"lab?x=1")], TASK, 4321) == [(b"location", b"lab?x=1")]
    rewritten = proxy._answer_headers([(b"location", f"http://127.0.0.1:4321{own}".encode())], TASK, 4321)
    assert rewritten == [(b"location", own.encode())]
    for hostile in (b"http://evil.example/", b"//evil.example/x", b"/api/v1/users", b"/proxy/other-task/",
                    b"https://127.0.0.1:9/x", b"/\\evil.example"):
        assert proxy._answer_headers([(b"location", hostile)], TASK, 4321) is None, hostile


def test_the_task_cannot_set_or_see_the_proxys_cookie_nor_send_hop_by_hop_headers() -> None:
    kept = proxy._answer_headers([(b"set-cookie", b"det_proxy_x=stolen; Path=/"), (b"set-cookie", b"_xsrf=1"),
                                  (b"connection", b"close"), (b"transfer-encoding", b"chunked"),
                                  (b"date", b"Sat, 28 Nov 2026 10:00:00 GMT"), (b"server", b"TornadoServer/6.5"),
                                  (b"content-type", b"text/html")], TASK, 4321)
    assert kept == [(b"set-cookie", b"_xsrf=1"), (b"content-type", b"text/html")]
