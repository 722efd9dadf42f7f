"""The SSH server of a shell task: `python -m determined.master.tasks.shell_server --port P --host-key F
--authorized-key F`, on 127.0.0.1 only, reached through the master's proxy (a WebSocket carrying the TCP stream,
`det shell open`, `python -m determined.cli.tunnel` as ssh's ProxyCommand).

asyncssh rather than OpenSSH's sshd: it is a Python package (`pip install 'determined-revived[shell]'`) where sshd
is a system package this machine may not have, it runs as the task's account without root or a config file, and
it accepts exactly the task's one public key. Sessions run the client's command (or the account's login shell)
with a pseudo-terminal when the client asks for one; scp and SFTP serve the file system as the account sees it;
`-L` port forwards connect from the task's machine, `-R` forwards listen on its loopback only.
"""
import argparse
import asyncio
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from typing import Any, List, Optional


def _argv(command: Optional[str]) -> List[str]:
    if command:
        return ["/bin/sh", "-c", command]
    shell = os.environ.get("SHELL") or ("/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh")
    return [shell, "-l"]


def _set_size(fd: int, size: Any) -> None:
    width, height = int(size[0] or 80), int(size[1] or 24)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


async def _copy_out(read: Any, process_writer: Any) -> None:
    """A child's output to the SSH channel, until its end (a pty's master reads EIO once the child is gone)."""
    while True:
        try:
            data = await read()
        except OSError:
            return
        if not data:
            return
        process_writer.write(data)
        await process_writer.drain()


async def _copy_in(process: Any, write: Any, close: Any, resize: Any) -> None:
    """The SSH channel's input to the child, window size changes to its pty, until the client's EOF."""
    import asyncssh

    try:
        while True:
            try:
                data = await process.stdin.read(1 << 16)
            except asyncssh.TerminalSizeChanged as change:
                resize((change.width, change.height))
                continue
            except asyncssh.BreakReceived:
                continue
            if not data:
                break
            await write(data)
    except (OSError, asyncssh.Error):
        pass
    finally:
        close()


async def _session(process: Any) -> None:
    """One SSH session: the command (or a login shell) with the client's environment, on a pty when asked for.
    Its output is copied to the end before the exit status is sent, so nothing of it is lost."""
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (process.env or {}).items()})
    cwd = env.get("DET_WORKDIR") or os.getcwd()
    argv = _argv(process.command)
    term = process.get_terminal_type()
    loop = asyncio.get_running_loop()
    if term:
        env["TERM"] = term
        master, slave = pty.openpty()
        _set_size(master, process.get_terminal_size())
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(master, "rb", 0))
        writer_fd = os.dup(master)

        async def write(data: bytes) -> None:
            await loop.run_in_executor(None, os.write, writer_fd, data)

        copy_in = asyncio.ensure_future(_copy_in(process, write, lambda: None, lambda size: _set_size(writer_fd, size)))
        await _copy_out(lambda: reader.read(1 << 16), process.stdout)
        code = await loop.run_in_executor(None, proc.wait)
        copy_in.cancel()
        os.close(writer_fd)
    else:
        child = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                     stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                     env=env, cwd=cwd, start_new_session=True)
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        stdin = child.stdin

        async def write(data: bytes) -> None:
            stdin.write(data)
            await stdin.drain()

        copy_in = asyncio.ensure_future(_copy_in(process, write, stdin.close, lambda size: None))
        await asyncio.gather(_copy_out(lambda: child.stdout.read(1 << 16), process.stdout),  # type: ignore
                             _copy_out(lambda: child.stderr.read(1 << 16), process.stderr))  # type: ignore
        code = await child.wait()
        copy_in.cancel()
    process.exit(code if code >= 0 else 128 - code)


def _server_class() -> Any:
    import asyncssh

    class TaskSSHServer(asyncssh.SSHServer):  # type: ignore[misc]
        def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
            return True  # ssh -L: the task's machine connects to dest

        def server_requested(self, listen_host: str, listen_port: int) -> bool:
            return listen_host in ("", "localhost", "127.0.0.1", "::1")  # ssh -R: loopback only

    return TaskSSHServer


def _sftp_class() -> Any:
    import asyncssh

    class TaskSFTPServer(asyncssh.SFTPServer):  # type: ignore[misc]
        """The file system as the task's account sees it; its session ends with exit status 0, which OpenSSH's scp
        (SFTP mode, its default) requires."""

        def exit(self) -> None:
            super().exit()
            try:
                self.channel.exit(0)
            except (OSError, asyncssh.Error, AttributeError):
                pass

    return TaskSFTPServer


async def serve(port: int, host_key: str, authorized_key: str, host: str = "127.0.0.1") -> None:
    import asyncssh

    server = await asyncssh.create_server(
        _server_class(), host, port, server_host_keys=[host_key], authorized_client_keys=authorized_key,
        process_factory=_session, encoding=None, allow_scp=True, sftp_factory=_sftp_class(), agent_forwarding=False,
        x11_forwarding=False)
    print(f"SSH server listening on {host}:{port}", flush=True)
    async with server:
        await server.wait_closed()


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="shell_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host-key", required=True)
    parser.add_argument("--authorized-key", required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (a Ray node's own IP: the "
                        "master's proxy reaches it there)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.port, args.host_key, args.authorized_key, args.host))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
