"""`exit_process`: end a command-line process the way the interpreter would, without tearing its modules down.

At exit CPython waits for non-daemon threads, runs the `atexit` handlers, flushes the standard streams, and then
finalises: it clears every module and frees every object. The last part does nothing a process that is about to
end needs, and it is slow where the heap is large: a process forked from a server that imported torch touches
every inherited object while it frees it, and each touched page is copied (0.3-0.7 s of a trial's end, measured;
the process's own `det` CLI, with the master's web stack imported, 0.2-1 s). `exit_process` does the first three,
also flushes the files the program left open (an unclosed file would be flushed when it is freed), and ends the
process with `os._exit`.

Only entry points (`if __name__ == "__main__"`, the `det` script) call it, after their `main()` returned normally:
an exception still ends the process through the interpreter, with its traceback.
"""
import atexit
import gc
import io
import os
import sys
import threading
from typing import Dict, NoReturn, Optional, Union

# The status CPython exits with when it cannot flush stdout at exit.
_FLUSH_FAILED = 120


def exit_process(code: Union[int, str, None] = 0) -> NoReturn:
    """End this process with `code` (as `sys.exit(code)` would at the top level), skipping the interpreter's
    teardown of modules and objects."""
    status = _status(code)
    shutdown_threads = getattr(threading, "_shutdown", None)
    if shutdown_threads is not None:
        shutdown_threads()  # the interpreter's own first step at exit: join non-daemon threads
    atexit._run_exitfuncs()
    _flush_open_files()
    for stream in (sys.stderr, sys.stdout):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout and status == 0:
                status = _FLUSH_FAILED
    os._exit(status)


def _status(code: Union[int, str, None]) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)  # sys.exit("message"): the message, status 1
    return 1


def _flush_open_files(generations: Optional[range] = None) -> None:
    """Flush the writable file objects still open. Objects frozen by `gc.freeze()` (a server's imports, made before
    it forked this process) are in no generation and are not visited, so their pages stay shared."""
    is_file: Dict[type, bool] = {}
    for generation in generations or range(3):
        for obj in gc.get_objects(generation):
            kind = type(obj)
            known = is_file.get(kind)
            if known is None:
                known = is_file[kind] = issubclass(kind, io.IOBase)
            if known and obj is not sys.stdout and obj is not sys.stderr:
                try:
                    if not obj.closed and obj.writable():
                        obj.flush()
                except (OSError, ValueError):
                    pass
