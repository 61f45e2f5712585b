"""Chunks of a corpus packed in worker processes, or in this one: the counts come back in chunk order.

The main process reads the documents and hands chunks (:func:`tokenmask.blocks.shard.document_chunks`)
to a pool of ``num_proc`` processes, at most two per process in flight, so memory holds a few
chunks whatever the corpus's size; each worker writes its chunks' shard files itself. Workers
start from a fork server (or are spawned), never forked from this process (the tokenizer's
threads, and torch's, do not survive a fork); they get the tokenizer once and encode on one
thread each (``TOKENIZERS_PARALLELISM=false``): the processes are the parallelism. A corpus of one chunk, or ``num_proc=1``, is packed here, with no pool.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from tokenmask.blocks.shard import ChunkCounts, ChunkJob, pack_chunk

IN_FLIGHT_PER_PROCESS = 2
"""Chunks handed out per worker before the main process waits for the oldest: one being packed, one ready."""

_SOCKET_PATH_LIMIT = 103 if sys.platform == "darwin" else 107
"""Bytes of a Unix socket's path, its closing NUL left out (``sun_path`` is 104 bytes on macOS, 108 on Linux)."""

_SERVER_SOCKET_SUFFIX = len("/pymp-12345678/listener-12345678")
"""What multiprocessing adds to the temp folder for the fork server's socket."""


def default_num_proc() -> int:
    """The cores this process may run on (``os.process_cpu_count()`` where Python has it)."""
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        return counted() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def packed_chunks(
    chunks: Iterable[list[str]],
    job: ChunkJob,
    *,
    num_proc: int,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[ChunkCounts]:
    """Pack ``chunks`` (numbered from 0) into shard files under ``job.folder``; yield each
    chunk's counts, in order, as it completes.

    ``progress(documents, tokens)`` reports inside a chunk packed in this process (a pool
    reports whole chunks, through what is yielded). A failing chunk stops the pool: the chunks
    not started are cancelled and the ones running finish before the error is raised here, so
    nothing writes into ``job.folder`` afterwards.
    """
    chunks = iter(chunks)
    head = list(itertools.islice(chunks, 2))
    if num_proc == 1 or len(head) < 2:
        for index, texts in enumerate(_chained(head, chunks)):
            yield pack_chunk(job, index, texts, progress=progress)
        return
    yield from _in_pool(_chained(head, chunks), job, num_proc)


def _chained(head: list[list[str]], rest: Iterator[list[str]]) -> Iterator[list[str]]:
    """``head``'s chunks, then ``rest``'s; a chunk handed out is dropped from ``head`` (not held to the end)."""
    while head:
        yield head.pop(0)
    yield from rest


def _in_pool(chunks: Iterable[list[str]], job: ChunkJob, num_proc: int) -> Iterator[ChunkCounts]:
    pool = ProcessPoolExecutor(num_proc, mp_context=_context(job), initializer=_start_worker, initargs=(job,))
    pending: deque[Future[ChunkCounts]] = deque()
    try:
        for index, texts in enumerate(chunks):
            pending.append(pool.submit(_pack_in_worker, index, texts))
            while len(pending) >= IN_FLIGHT_PER_PROCESS * num_proc or (pending and pending[0].done()):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _context(job: ChunkJob) -> multiprocessing.context.BaseContext:
    """A fork server where there is one (Linux, macOS), else spawn.

    The server is a fresh process that imports what the workers need (transformers, the
    tokenizer's class, the packing code; torch too for phrases) once, before any thread
    starts, and forks each worker from there: a pool starts in a fraction of a second
    instead of a few (each spawned worker importing transformers anew). It lives as long as
    this process and serves later pools too; the modules are named before it starts (later
    pools import what it lacks themselves). Under a temp folder too long for the server's
    Unix socket (a deep ``TMPDIR``), the pool would fail to start: spawn then, slower but sure.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods() or not _socket_fits():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    modules = ["__main__", "tokenmask.blocks.shard", "tokenmask.blocks.store", type(job.tokenizer).__module__]
    if job.phrases is not None:
        modules.append("tokenmask.text.phrases")
    context.set_forkserver_preload(modules)
    return context


_JOB: ChunkJob | None = None
"""A worker's job, set once when it starts."""


def _start_worker(job: ChunkJob) -> None:
    global _JOB
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per process: the processes share the cores
    _JOB = job


def _pack_in_worker(index: int, texts: list[str]) -> ChunkCounts:
    assert _JOB is not None, "a worker runs _start_worker first"
    return pack_chunk(_JOB, index, texts)


def _socket_fits() -> bool:
    """Whether the fork server's socket path, under this process's temp folder, fits a Unix socket."""
    return len(os.fsencode(tempfile.gettempdir())) + _SERVER_SOCKET_SUFFIX <= _SOCKET_PATH_LIMIT
