"""The process's one DuckDB instance, which the store's files are attached to while connections use them.

A store connection (``connection.open_connection``) is a cursor on one in-memory DuckDB instance kept for
the whole process, with the file attached to it (``ATTACH``) for as long as a connection uses it and
detached (``DETACH``: checkpointed and its DuckDB lock given up, as closing an instance does) at once after.
Starting an instance builds DuckDB's catalog of built-in functions, 35-45 ms of CPU on these machines
whatever the file (an empty in-memory database too), and a generation of the example opens its store 87
times; attaching a file to a running instance costs 5 ms for a read and 13 ms for a write
(``benchmarks/store_open.py``). Callers hold the file's process lock (``connection._process_lock``).
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading

import duckdb

__all__ = ["attach", "detach_if_unused"]

_instance: duckdb.DuckDBPyConnection | None = None
_instance_lock = threading.Lock()  # held around every statement on the instance's own connection
_aliases = itertools.count(1)


class _Attachment:
    """A file attached to the instance: its alias, its mode, and how many connections use it."""

    def __init__(self, alias: str, read_only: bool) -> None:
        self.alias, self.read_only, self.users = alias, read_only, 0


_attached: dict[str, _Attachment] = {}  # file key -> attachment; guarded by the file's process lock
_orphaned: list[duckdb.DuckDBPyConnection] = []


def _process_instance() -> duckdb.DuckDBPyConnection:
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = duckdb.connect(":memory:")
        return _instance


def _forget_in_child() -> None:
    """A forked child starts an instance of its own. Its copy of the parent's is kept, never used or closed:
    closing it would wait for worker threads that exist only in the parent."""
    global _instance, _instance_lock
    _instance_lock = threading.Lock()  # another thread of the parent may have held it at the fork
    if _instance is not None:
        _orphaned.append(_instance)
    _instance = None
    _attached.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _close_instance() -> None:
    """Close the instance when the process ends: DuckDB's bindings report one still open as a leak."""
    global _instance
    with _instance_lock:
        if _instance is not None:
            _instance.close()
        _instance = None


def attach(key: str, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection whose default database is the file ``key``, attached first unless it already is.

    Raises:
        duckdb.Error: DuckDB cannot open the file (held by another process, damaged, missing...), the
            same errors ``duckdb.connect`` raises; or a read-write connection is asked for while a
            read-only one of this process is open on the file (as ``duckdb.connect`` refuses it).
    """
    instance = _process_instance()
    attachment = _attached.get(key)
    if attachment is None:
        alias = f"sopforge_{next(_aliases)}"
        path = key.replace("'", "''")
        with _instance_lock:
            instance.execute(f"ATTACH '{path}' AS {alias}" + (" (READ_ONLY)" if read_only else ""))
        attachment = _attached[key] = _Attachment(alias, read_only)
    elif attachment.read_only and not read_only:
        raise duckdb.ConnectionException(f"{key} is open read-only in this process: it cannot be written now")
    attachment.users += 1
    try:
        with _instance_lock:
            con = instance.cursor()
        con.execute(f"USE {attachment.alias}")
    except BaseException:
        detach_if_unused(key)
        raise
    return con


def detach_if_unused(key: str) -> None:
    attachment = _attached.get(key)
    if attachment is None:
        return
    attachment.users = max(attachment.users - 1, 0)
    if attachment.users == 0:
        del _attached[key]
        instance = _process_instance()
        with _instance_lock:
            instance.execute(f"DETACH {attachment.alias}")
