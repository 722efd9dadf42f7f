"""A synchronous httpx transport onto an ASGI app in this process (the in-process master, see ARCHITECTURE.md).

httpx's own `ASGITransport` needs an async client, and the `Session` is sync: `ASGIThreadTransport` runs the app
on an event loop of its own, in a daemon thread started at the first request, once the app's lifespan has started
(as a server would run it). `close()` (or the transport being garbage collected) runs the lifespan's shutdown and
ends the thread. Like httpx's ASGITransport, it reads an answer whole before returning it: a streamed answer
arrives when it ends.
"""
import asyncio
import contextlib
import os
import threading
import weakref
from typing import Any, Awaitable, Callable, Dict, MutableMapping, Optional, Tuple, TypeVar

import httpx

T = TypeVar("T")
ASGIApp = Callable[..., Awaitable[None]]
IN_PROCESS_URL = "http://in-process"
SHUTDOWN_WAIT_S = 10.0


class _AppLoop:
    """An event loop in a daemon thread, on which one ASGI app runs, its lifespan started."""

    def __init__(self, app: ASGIApp) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="determined-in-process-app", daemon=True)
        self._shutdown: Optional[asyncio.Event] = None
        self._lifespan: "Optional[asyncio.Future[None]]" = None
        self._stopping = False
        self.thread.start()
        try:
            self.run(self._start_lifespan(app))
        except BaseException:
            self.stop(wait=True)
            raise

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def run(self, coroutine: Awaitable[T]) -> T:
        """Run `coroutine` on the loop and wait for its result, from any thread but the loop's own."""
        if threading.current_thread() is self.thread:
            raise RuntimeError("the in-process transport cannot be used from inside the app it serves")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()  # type: ignore[arg-type]

    async def _start_lifespan(self, app: ASGIApp) -> None:
        """The ASGI lifespan protocol: startup now; shutdown when `stop()` sets the event."""
        shutdown = self._shutdown = asyncio.Event()
        started: "asyncio.Future[None]" = self.loop.create_future()
        startup_sent = False

        async def receive() -> Dict[str, Any]:
            nonlocal startup_sent
            if not startup_sent:
                startup_sent = True
                return {"type": "lifespan.startup"}
            await shutdown.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "lifespan.startup.complete" and not started.done():
                started.set_result(None)
            elif message["type"] == "lifespan.startup.failed" and not started.done():
                started.set_exception(RuntimeError(f"the app's lifespan failed to start: {message.get('message')}"))

        async def lifespan() -> None:
            scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
            try:
                await app(scope, receive, send)
            except BaseException as e:
                if not started.done():
                    if startup_sent:
                        started.set_exception(e)
                    else:  # an app without a lifespan (ASGI: the server goes on without one)
                        started.set_result(None)
                    return
                # an error of the app's shutdown: the app goes away all the same
            finally:
                if not started.done():
                    started.set_result(None)

        self._lifespan = asyncio.ensure_future(lifespan())
        await started

    def stop(self, wait: bool) -> None:
        """Run the lifespan's shutdown, then end the loop; `wait`: until the thread has ended (bounded)."""
        if self.pid != os.getpid() or self._stopping:
            return  # a forked child has no copy of the thread
        self._stopping = True

        def begin() -> None:
            if self._shutdown is not None:
                self._shutdown.set()
            self.loop.call_later(SHUTDOWN_WAIT_S, self.loop.stop)
            if self._lifespan is None or self._lifespan.done():
                self.loop.stop()
            else:
                self._lifespan.add_done_callback(lambda _: self.loop.stop())

        try:
            self.loop.call_soon_threadsafe(begin)
        except RuntimeError:  # the loop has ended already
            return
        if wait and threading.current_thread() is not self.thread:
            self.thread.join(SHUTDOWN_WAIT_S + 1)


class ASGIThreadTransport(httpx.BaseTransport):
    """Serves a sync httpx client's requests with the ASGI `app`, in this process (see the module's docstring).

    `client` is the (host, port) the app sees as the request's client; app exceptions are raised in the caller,
    as a test client raises them.
    """

    def __init__(self, app: ASGIApp, *, client: Tuple[str, int] = ("in-process", 0),
                 raise_app_exceptions: bool = True) -> None:
        self.app = app
        self._inner = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions, client=client)
        self._lock = threading.Lock()
        self._app_loop: Optional[_AppLoop] = None
        self._finalizer: Optional[weakref.finalize] = None

    def _loop(self) -> _AppLoop:
        with self._lock:
            app_loop = self._app_loop
            if app_loop is None or app_loop.pid != os.getpid():  # first use, or in a forked child
                app_loop = self._app_loop = _AppLoop(self.app)
                if self._finalizer is not None:
                    self._finalizer.detach()
                self._finalizer = weakref.finalize(self, app_loop.stop, False)
                self._finalizer.atexit = False  # at exit, the daemon thread just ends with the process
            return app_loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        forward = httpx.Request(request.method, request.url, headers=request.headers, content=body,
                                extensions=request.extensions)
        return self._loop().run(self._handle(forward))

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        answer = await self._inner.handle_async_request(request)
        raw = b"".join([chunk async for chunk in answer.aiter_raw()])
        return httpx.Response(answer.status_code, headers=answer.headers, stream=httpx.ByteStream(raw),
                              extensions=answer.extensions)

    def close(self) -> None:
        with self._lock:
            app_loop, self._app_loop = self._app_loop, None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        if app_loop is not None:
            app_loop.stop(wait=True)


class InProcessClient(httpx.Client):
    """An httpx client whose requests `app` serves in this process (`app`: the app, e.g. to reach its state)."""

    def __init__(self, app: ASGIApp, base_url: str = IN_PROCESS_URL, **kwargs: Any) -> None:
        kwargs.setdefault("follow_redirects", True)
        super().__init__(transport=ASGIThreadTransport(app), base_url=base_url, **kwargs)
        self.app = app
