"""Worker processes: `MEMSVC_WORKERS` copies of the server on one port, under one supervisor.

One Python process serves on one core at a time (the GIL), so a server with more cores scales
by processes. Each worker is a whole server with its own event loop, store clients and caches;
the kernel spreads new connections across them (SO_REUSEPORT), and they share state only where
replicas already do: the record store, the vector server and Redis. The supervisor does the
first-start work once (local secrets, migrations of the embedded store, the development key),
forwards SIGTERM and SIGINT so that every worker drains, and restarts a worker that dies.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import FrameType

from memsvc import eventloop, logs
from memsvc.bootstrap import bootstrap_dev_key, dev_key_banner, local_secrets
from memsvc.config import Settings
from memsvc.errors import MemsvcError
from memsvc.keys import ApiKeys
from memsvc.metrics import split_listen
from memsvc.tls import server_certificates

log = logging.getLogger(__name__)

# A worker that dies sooner than this after its start is restarted after a growing pause, so a
# worker that cannot start does not spin.
_HEALTHY_AFTER_S = 10.0
_RESTART_PAUSE_MAX_S = 30.0


def reserve_port(listen: str) -> tuple[socket.socket, str]:
    """Bind (without listening) the address the workers will share, choosing the port if it is 0.

    The socket holds the port for the supervisor's lifetime: a port chosen here stays ours while
    a worker restarts. It never listens, so it takes no connections from the workers.
    """
    host, port = listen.rsplit(":", 1)
    host = host.strip("[]")
    family, kind, proto, _, address = socket.getaddrinfo(
        host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    reserved = socket.socket(family, kind, proto)
    reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reserved.bind(address)
    chosen = reserved.getsockname()[1]
    return reserved, f"[{host}]:{chosen}" if ":" in host else f"{host}:{chosen}"


def worker_settings(settings: Settings, listen: str, index: int, count: int) -> Settings:
    """A worker's settings: the shared address, the worker count, its own metrics port."""
    update: dict[str, object] = {"listen": listen, "workers": count}
    if settings.metrics_listen:
        host, port = split_listen(settings.metrics_listen)
        # Every worker has its own instruments, so each is scraped on its own port.
        update["metrics_listen"] = f"{host}:{port + index}" if port else settings.metrics_listen
    return settings.model_copy(update=update)


async def first_start(settings: Settings) -> str | None:
    """What must happen once before the workers start: the TLS files checked, secrets, migrations,
    the development key."""
    from memsvc.stores.records.factory import build_record_store

    server_certificates(settings)
    secrets = local_secrets(settings)
    store = build_record_store(settings)
    try:
        if settings.uses_postgres:
            await store.check_schema()
        else:
            await store.migrate()
        return await bootstrap_dev_key(settings, store, ApiKeys(store, secrets.pepper, settings.auth_cache_ttl_s))
    finally:
        await store.close()


def serve_worker(settings: Settings, index: int) -> None:
    """A worker process's entry point (spawned: a fresh interpreter, nothing inherited)."""
    from memsvc.server import run_server

    logs.configure(prefix=f"worker-{index} ")
    try:
        eventloop.run(run_server(settings, worker=index))
    except MemsvcError as exc:
        # A worker that cannot start (its Milvus server down, its port taken) says why in one
        # line; the supervisor restarts it after a growing pause.
        log.error("worker %d cannot start: %s", index, exc.message)
        raise SystemExit(1) from exc


@dataclass
class _Worker:
    index: int
    process: BaseProcess
    started: float
    restarts: int = 0


class Supervisor:
    """Starts the workers, restarts one that dies, and stops them all on SIGTERM or SIGINT."""

    def __init__(self, settings: Settings, count: int) -> None:
        self._settings = settings
        self._count = count
        self._context = multiprocessing.get_context("spawn")
        self._stopping = threading.Event()

    def _spawn(self, listen: str, index: int, restarts: int = 0) -> _Worker:
        process = self._context.Process(
            target=serve_worker,
            args=(worker_settings(self._settings, listen, index, self._count), index),
            name=f"memsvc-worker-{index}",
        )
        process.start()
        return _Worker(index, process, time.monotonic(), restarts)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stopping.set()

    def run(self) -> int:
        reserved, listen = reserve_port(self._settings.listen)
        try:
            token = asyncio.run(first_start(self._settings))
            if token:
                print(dev_key_banner(token, listen, self._settings), flush=True)
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, self._on_signal)
            workers = [self._spawn(listen, i) for i in range(self._count)]
            print(f"memsvc serving on {listen} with {self._count} worker processes", flush=True)
            self._supervise(listen, workers)
            return self._stop(workers)
        finally:
            reserved.close()

    def _supervise(self, listen: str, workers: list[_Worker]) -> None:
        restart_at: dict[int, float] = {}
        while not self._stopping.wait(0.2):
            now = time.monotonic()
            for i, worker in enumerate(workers):
                if worker.process.is_alive():
                    continue
                if i not in restart_at:
                    quick = now - worker.started < _HEALTHY_AFTER_S
                    restarts = worker.restarts + 1 if quick else 0
                    pause = min(_RESTART_PAUSE_MAX_S, 2.0**restarts - 1) if quick else 0.0
                    log.error(
                        "worker %d (pid %s) exited with %s; restarting in %.0f s",
                        worker.index,
                        worker.process.pid,
                        worker.process.exitcode,
                        pause,
                    )
                    restart_at[i] = now + pause
                    worker.restarts = restarts
                if now >= restart_at[i] and not self._stopping.is_set():
                    del restart_at[i]
                    workers[i] = self._spawn(listen, worker.index, worker.restarts)

    def _stop(self, workers: list[_Worker]) -> int:
        print("memsvc draining in-flight calls in every worker", flush=True)
        for worker in workers:
            if worker.process.is_alive() and worker.process.pid is not None:
                os.kill(worker.process.pid, signal.SIGTERM)
        for worker in workers:
            worker.process.join()
        failed = [w for w in workers if w.process.exitcode != 0]
        for worker in failed:
            log.error("worker %d exited with %s", worker.index, worker.process.exitcode)
        return 1 if failed else 0
