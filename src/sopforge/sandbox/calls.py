"""What the sandbox child does with the user's module: calls, their outcomes, the tools process.

Loaded by ``child.py`` (by path, like ``guard.py``) inside the container; standard library only.

* ``call_tools``: groups of tool calls on the folder's Manager, one ``R`` record per group;
* ``run_function``: a function of the entry module (a reference procedure, sopforge's replay
  driver) per call, one ``R`` record per call. With ``tools_entry``, the function gets the
  Manager as its first argument, every call of it logged. When the parent runs the tools in a
  process of their own (``tools_channel``), what the function gets is a :class:`RemoteTools`:
  each call crosses a pipe to that process and back, so the tools' code never runs in this
  one and cannot touch the function's results or its log of tool calls;
* ``serve_tools``: the other end, in the tools' process: it answers calls until the function's
  process closes the pipe.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import posix
import sys

__all__ = ["LoadError", "OPS", "load_module"]

_MAX_MESSAGE = 64 * 1024 * 1024  # one request or answer on the tools channel


class LoadError(Exception):
    """The user module could not be imported or its Manager/function could not be set up."""


def load_module(sandbox_dir: str, entry: str):
    """Import ``entry`` by path, as the SOP-Bench harness does."""
    path = os.path.join(sandbox_dir, entry)
    name = os.path.splitext(os.path.basename(entry))[0]
    if name in sys.modules:  # never shadow a module the interpreter already holds (json.py, ...)
        name = f"sandbox_{name}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {entry}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except MemoryError:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import time is a load error too
        raise LoadError(f"importing {entry} raised {describe(exc, sandbox_dir)}") from None
    return module


def instantiate_manager(module, entry: str, sandbox_dir: str):
    """Instantiate the alphabetically first public name ending in 'Manager', with no args."""
    names = sorted(n for n in vars(module) if n.endswith("Manager") and not n.startswith("_"))
    if not names:
        raise LoadError(f"{entry} defines no public name ending in 'Manager'")
    try:
        return getattr(module, names[0])()
    except MemoryError:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise LoadError(f"{names[0]}() raised {describe(exc, sandbox_dir)}") from None


def user_line(exc: BaseException, sandbox_dir: str) -> int | None:
    """Line of the innermost frame that belongs to a file in the sandbox folder."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(sandbox_dir):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def describe(exc: BaseException, sandbox_dir: str, as_dict: bool = False):
    try:
        message = str(exc)[:2000]
    except Exception:  # noqa: BLE001 - a user-defined __str__ may itself fail
        message = "<unprintable>"
    info = {"type": type(exc).__name__, "message": message, "line": user_line(exc, sandbox_dir)}
    if as_dict:
        return info
    where = f" at line {info['line']}" if info["line"] else ""
    return f"{info['type']}{where}: {message}"


def find_unencodable(value, path: str = "$", depth: int = 0) -> str | None:
    """Path and type of the first value json.dumps cannot encode."""
    if depth > 50:
        return f"{path}: nested too deeply"
    if value is None or isinstance(value, (str, int, float, bool)):
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = find_unencodable(item, f"{path}[{i}]", depth + 1)
            if found:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not (key is None or isinstance(key, (str, int, float, bool))):
                return f"{path}: key {key!r} of type {type(key).__module__}.{type(key).__qualname__}"
            found = find_unencodable(item, f"{path}.{key}", depth + 1)
            if found:
                return found
        return None
    return f"{path}: {type(value).__module__}.{type(value).__qualname__}"


def run_call(fn, *, tool: str | None, sandbox_dir: str, max_bytes: int, tool_calls: list | None = None) -> str:
    """Run one call and return its outcome as a JSON object (see models.CallOutcome)."""
    out: dict = {"tool": tool, "ok": True}
    if tool_calls is not None:
        out["tool_calls"] = tool_calls
    encoded = None
    try:
        value = fn()
    except MemoryError:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from user code are call errors
        out.update(ok=False, error=describe(exc, sandbox_dir, as_dict=True))
    else:
        try:
            encoded = json.dumps(value)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - TypeError, ValueError (circular), user __iter__ errors
            out.update(json_ok=False, unencodable=find_unencodable(value) or f"$: {exc}"[:300])
        else:
            out.update(json_ok=True, result_bytes=len(encoded))
            if len(encoded) > max_bytes:
                out["omitted"], encoded = True, None
    text = json.dumps(out, default=repr)
    return text if encoded is None else f'{text[:-1]},"result":{encoded}}}'


def dispatch(manager, tool: str, tool_input):
    """process_tool_call(name, input) positionally, else the method named like the tool."""
    handler = getattr(manager, "process_tool_call", None)
    if handler is not None:
        return handler(tool, tool_input)
    return getattr(manager, tool)(**tool_input)


class RecordingTools:
    """What a reference procedure receives as ``tools``: the Manager, with every call logged."""

    def __init__(self, manager, log: list):
        self._manager, self._log = manager, log

    def _record(self, tool: str, tool_input, fn):
        entry = {"tool": tool, "input": dict(tool_input) if isinstance(tool_input, dict) else tool_input, "ok": False}
        self._log.append(entry)
        value = fn()
        entry["ok"] = True
        return value

    def process_tool_call(self, tool_name, tool_input):
        return self._record(tool_name, tool_input, lambda: dispatch(self._manager, tool_name, tool_input))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._manager, name, None)
        if attr is None and hasattr(self._manager, "process_tool_call"):
            # tools.getCreditScore(application_id=...) goes through the dispatcher, like the harness
            return lambda **kwargs: self.process_tool_call(name, kwargs)
        if attr is None or not callable(attr):
            return getattr(self._manager, name)

        def method(*args, **kwargs):
            shown = {"args": list(args), **kwargs} if args else kwargs
            return self._record(name, shown, lambda: attr(*args, **kwargs))
        return method


def op_call_tools(payload: dict, module, emit) -> int:
    sandbox_dir, entry, cap = payload["sandbox_dir"], payload["entry"], payload["max_result_bytes"]
    per_group = payload.get("instance", "shared") == "per_group"
    manager = None if per_group else instantiate_manager(module, entry, sandbox_dir)
    for index, group in enumerate(payload["groups"]):
        if per_group:
            manager = instantiate_manager(module, entry, sandbox_dir)
        calls = [run_call(lambda c=call: dispatch(manager, c["tool"], c.get("input", {})),
                          tool=call["tool"], sandbox_dir=sandbox_dir, max_bytes=cap) for call in group]
        emit("R", f'{{"i":{index},"calls":[{",".join(calls)}]}}')
    return len(payload["groups"])


def op_run_function(payload: dict, module, emit) -> int:
    sandbox_dir, cap = payload["sandbox_dir"], payload["max_result_bytes"]
    func = getattr(module, payload["function"], None)
    if not callable(func):
        raise LoadError(f"{payload['entry']} has no function {payload['function']!r}")
    manager, channel = None, payload.get("tools_channel")
    if payload.get("tools_entry") and channel is None:
        tools_module = load_module(sandbox_dir, payload["tools_entry"])
        manager = instantiate_manager(tools_module, payload["tools_entry"], sandbox_dir)
    for index, call in enumerate(payload["calls"]):
        args, kwargs, log = list(call.get("args", [])), dict(call.get("kwargs", {})), None
        if channel is not None:
            log = []
            args.insert(0, RemoteTools(channel["request_fd"], channel["response_fd"], log))
        elif manager is not None:
            log = []
            args.insert(0, RecordingTools(manager, log))
        outcome = run_call(lambda: func(*args, **kwargs), tool=None, sandbox_dir=sandbox_dir,
                           max_bytes=cap, tool_calls=log)
        emit("R", f'{{"i":{index},"outcome":{outcome}}}')
    return len(payload["calls"])


# ----------------------------------------------------------------------------- the tools channel

def _send(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[posix.write(fd, view):]


def _receive(fd: int) -> bytes | None:
    """One length-prefixed message, or None at end of stream."""
    header = _read(fd, 4)
    if header is None:
        return None
    size = int.from_bytes(header, "big")
    if size > _MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes on the tools channel")
    body = _read(fd, size)
    if body is None:
        raise EOFError("the tools channel ended inside a message")
    return body


def _read(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = posix.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ToolsProcessGone(Exception):
    """The tools' process stopped (killed for a violation, a limit, or a crash); its own report says why."""


def _remote_error(info: dict) -> Exception:
    """The tools' exception, re-created by name and message (its class cannot cross processes)."""
    name = str(info.get("type") or "Exception")
    message = str(info.get("message") or "")
    base = getattr(builtins, name, None)
    if not (isinstance(base, type) and issubclass(base, Exception)):
        base = Exception
    cls = type(name if name.isidentifier() else "ToolError", (base,), {"__str__": lambda self: message})
    return cls(message)


class RemoteTools:
    """What the function receives as ``tools`` when the tools run in their own process."""

    def __init__(self, request_fd: int, response_fd: int, log: list):
        self._request, self._response, self._log = request_fd, response_fd, log

    def _call(self, tool: str, shown, request: dict):
        entry = {"tool": tool, "input": shown, "ok": False}
        self._log.append(entry)
        try:
            _send(self._request, json.dumps(request).encode("utf-8"))
            answer = _receive(self._response)
        except OSError as exc:
            raise ToolsProcessGone(f"the tools process is gone ({exc})") from None
        if answer is None:
            raise ToolsProcessGone("the tools process stopped before answering")
        outcome = json.loads(answer)
        if not outcome.get("ok"):
            raise _remote_error(outcome.get("error") or {})
        if not outcome.get("json_ok") or outcome.get("omitted"):
            raise TypeError(f"tool {tool} returned a value that cannot cross to the procedure "
                            f"({outcome.get('unencodable') or 'larger than the result limit'})")
        entry["ok"] = True
        return outcome.get("result")

    def process_tool_call(self, tool_name, tool_input):
        shown = dict(tool_input) if isinstance(tool_input, dict) else tool_input
        return self._call(tool_name, shown, {"tool": tool_name, "input": tool_input})

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def method(*args, **kwargs):
            shown = {"args": list(args), **kwargs} if args else kwargs
            return self._call(name, shown, {"tool": name, "method": True, "args": list(args), "kwargs": kwargs})
        return method


def _serve_call(manager, request: dict):
    """One call as ``RecordingTools`` would make it on the real Manager."""
    tool = request["tool"]
    if not request.get("method"):
        return dispatch(manager, tool, request.get("input", {}))
    attr = getattr(manager, tool, None)
    if attr is None and hasattr(manager, "process_tool_call"):
        return manager.process_tool_call(tool, request.get("kwargs", {}))
    if not callable(attr):
        raise AttributeError(f"the Manager has no tool {tool!r}")
    return attr(*request.get("args", []), **request.get("kwargs", {}))


def op_serve_tools(payload: dict, module, emit) -> int:
    """Answer the function's process until it closes the channel; returns the calls served."""
    sandbox_dir, cap = payload["sandbox_dir"], payload["max_result_bytes"]
    manager = instantiate_manager(module, payload["entry"], sandbox_dir)
    served = 0
    while True:
        request = _receive(payload["request_fd"])
        if request is None:
            return served
        call = json.loads(request)
        outcome = run_call(lambda: _serve_call(manager, call), tool=str(call.get("tool")), sandbox_dir=sandbox_dir,
                           max_bytes=cap)
        _send(payload["response_fd"], outcome.encode("utf-8"))
        served += 1


class _NoToolsModule:
    """Import finder of the function's process: the tools module is in the other process."""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            raise ImportError(f"{self.name} runs in a process of its own here: reach the tools through the "
                              "manager the procedure receives")
        return None


def keep_tools_out(payload: dict) -> None:
    """In the function's process, importing the tools module fails (its code runs elsewhere)."""
    if payload.get("tools_channel") and payload.get("tools_entry"):
        name = os.path.splitext(os.path.basename(payload["tools_entry"]))[0]
        sys.meta_path.insert(0, _NoToolsModule(name))


OPS = {"call_tools": op_call_tools, "run_function": op_run_function, "serve_tools": op_serve_tools}
