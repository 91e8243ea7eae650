"""The tables behind the AST policy: which modules, names and attributes tool code may use.

Kept apart from the visitor in ``policy.py`` so a reviewer can read the whole policy as data.
Every denial carries a *kind* (the CheckResult a violation lands in) and a *reason* phrased
for the LLM that will be re-asked with the message.
"""

from __future__ import annotations

# The default allow-list of importable modules (a dotted prefix allows its submodules).
# The brief's list plus a few pure, deterministic helpers LLM code reaches for constantly
# (string, operator, abc, numbers, bisect, heapq, __future__). numpy is allowed because it is
# a hard dependency of pandas, so it is installed wherever pandas is; numpy.random is denied
# below. ``os`` is importable only so ``os.path`` can be used: every other os attribute is
# rejected by OS_ALLOWED_ATTRS.
DEFAULT_ALLOWED: frozenset[str] = frozenset({
    "__future__", "abc", "bisect", "collections", "copy", "csv", "dataclasses", "datetime",
    "decimal", "enum", "fractions", "functools", "heapq", "itertools", "json", "math", "numbers",
    "numpy", "operator", "os", "pandas", "re", "statistics", "string", "typing",
})

# The "published" mode (``sopforge audit`` of folders written by people): the modules their
# tools.py files import as a matter of course. They read files through paths kept anywhere,
# log, print and parse dates; the OS boundary (a read-only copy of the folder, nothing else
# mounted) and the guard (reads outside the folder are violations) keep everything else out.
# ``ast`` is allowed for ``ast.literal_eval`` only (see AST_ALLOWED_ATTRS).
PUBLISHED_ALLOWED: frozenset[str] = DEFAULT_ALLOWED | frozenset({
    "logging", "pathlib", "dateutil", "ast", "random", "uuid", "time", "typing_extensions", "textwrap",
    "calendar", "difflib", "pprint", "warnings", "hashlib", "unicodedata",
})
# Denied prefixes the published mode lifts: pathlib (reads are judged at run time) and ast
# (literal_eval only). Randomness and clock stay denied but are deferred (DEFERRED_KINDS): the
# audit measures their effect by running the tools twice (a shuffled list no tool returns
# changes nothing).
PUBLISHED_LIFTED: frozenset[str] = frozenset({"pathlib", "ast"})
AST_ALLOWED_ATTRS: frozenset[str] = frozenset({"literal_eval"})
# Kinds the published mode reports as a note for the runtime checks instead of refusing.
DEFERRED_KINDS: frozenset[str] = frozenset({"randomness", "clock"})
# Methods that change files whatever object they are called on (pathlib.Path and kin).
PATH_WRITERS: frozenset[str] = frozenset({
    "write_text", "write_bytes", "unlink", "mkdir", "rmdir", "touch", "symlink_to", "hardlink_to",
    "link_to", "chmod", "lchmod",
})

# Violation kinds, in the order their CheckResults are reported.
KINDS: tuple[str, ...] = (
    "syntax", "imports", "network", "processes", "native_code", "randomness", "clock",
    "environment", "dynamic_code", "filesystem", "interactive",
)

REASONS: dict[str, str] = {
    "imports": "tools may import only the standard-library helpers and pandas",
    "network": "tools may not use the network",
    "processes": "tools may not start processes or threads",
    "native_code": "tools may not load native code",
    "randomness": "tools must be deterministic",
    "clock": "tools must not read the clock; results must be reproducible",
    "environment": "tools may not read the environment",
    "dynamic_code": "tools may not generate code dynamically or reach interpreter internals",
    "filesystem": "tools may only read their own data files, "
                  "e.g. open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data.csv'))",
    "interactive": "tools run unattended",
}

# Denied module prefixes -> kind. These win over the allow-list, even one a caller extends:
# the Principles forbid network, processes, randomness and clock whatever the configuration.
DENIED_MODULES: dict[str, str] = {
    **dict.fromkeys((
        "socket", "_socket", "ssl", "_ssl", "http", "urllib", "urllib3", "requests", "httpx",
        "aiohttp", "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib", "xmlrpc",
        "socketserver", "asyncio", "selectors", "select", "webbrowser", "websocket", "websockets",
        "paramiko", "boto3", "botocore", "grpc",
    ), "network"),
    **dict.fromkeys((
        "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing", "concurrent",
        "threading", "_thread", "pty", "signal", "sh", "pexpect", "posix", "nt",
    ), "processes"),
    **dict.fromkeys(("ctypes", "_ctypes", "cffi", "mmap", "numpy.ctypeslib", "numpy.lib.stride_tricks"),
                    "native_code"),
    **dict.fromkeys(("numpy.f2py", "numpy.distutils", "numpy.testing"), "processes"),
    # typing.get_type_hints/ForwardRef eval strings; string.Formatter.get_field is getattr by name.
    **dict.fromkeys(("typing.get_type_hints", "typing.ForwardRef", "string.Formatter"), "dynamic_code"),
    **dict.fromkeys(("random", "_random", "secrets", "uuid", "numpy.random"), "randomness"),
    **dict.fromkeys(("time", "timeit"), "clock"),
    # logging writes to stderr by default; its handlers and config listener reach files and sockets.
    **dict.fromkeys(("logging.config", "logging.handlers"), "network"),
    "logging.FileHandler": "filesystem",
    **dict.fromkeys((
        "importlib", "imp", "runpy", "code", "codeop", "pickle", "_pickle", "marshal", "shelve",
        "dill", "cloudpickle", "builtins", "inspect", "sys", "gc", "types", "ast", "dis",
        "pdb", "bdb", "trace", "tracemalloc",
    ), "dynamic_code"),
    **dict.fromkeys((
        "shutil", "tempfile", "glob", "fnmatch", "pathlib", "io", "_io", "fileinput", "sqlite3",
        "dbm", "zipfile", "tarfile", "gzip", "bz2", "lzma", "zlib", "codecs", "linecache",
    ), "filesystem"),
}

# os attributes tools may use: path handling and separator constants, nothing that acts.
OS_ALLOWED_ATTRS: frozenset[str] = frozenset(
    {"path", "sep", "altsep", "extsep", "pathsep", "linesep", "curdir", "pardir"})
# os.path functions that consult the environment (HOME, $VARS) rather than the arguments.
OS_PATH_DENIED: dict[str, str] = {"expanduser": "environment", "expandvars": "environment"}
_OS_ENV = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")
_OS_PROC = ("system", "popen", "fork", "forkpty", "kill", "killpg", "abort", "_exit",
            "posix_spawn", "posix_spawnp", "startfile", "wait", "waitpid", "register_at_fork")


def os_attribute_kind(attr: str) -> str:
    """Return the violation kind of ``os.<attr>`` (callers check OS_ALLOWED_ATTRS first)."""
    if attr in _OS_ENV:
        return "environment"
    if attr in _OS_PROC or attr.startswith(("exec", "spawn")):
        return "processes"
    if attr in ("urandom", "getrandom"):
        return "randomness"
    if attr == "times":
        return "clock"
    return "filesystem"


# Builtins that must not be referenced at all (not only called): ``f = eval`` is as bad.
FORBIDDEN_BUILTINS: dict[str, str] = {
    **dict.fromkeys(("eval", "exec", "compile", "__import__", "globals", "locals", "vars",
                     "__builtins__", "__loader__", "__spec__", "memoryview"), "dynamic_code"),
    **dict.fromkeys(("breakpoint", "input", "exit", "quit", "help"), "interactive"),
}

# Builtins that no name of the module may be bound to (assignment, parameter, default argument,
# import alias, def, class, loop/with/except/match target): ``exec = exec`` or
# ``def f(open=open)`` would make every later use look like the module's own name, which the
# checks above trust. Binding ``input`` or ``type`` stays allowed: rebinding them reaches nothing.
NEVER_BOUND: frozenset[str] = frozenset(
    {name for name, kind in FORBIDDEN_BUILTINS.items() if kind == "dynamic_code"}
    | {"open", "getattr", "setattr", "delattr", "hasattr", "breakpoint", "__match_args__"})

# Attribute names that reach other attributes by a name given at run time: an object's
# ``str.format`` field (``"{0.__globals__}"``), operator's getters. Asking for them by name
# (getattr, attrgetter, methodcaller) is refused, and their direct uses are checked in byname.py.
NAME_REACHING_ATTRS: frozenset[str] = frozenset({"format", "format_map", "attrgetter", "methodcaller", "vformat"})

# The only dunder attributes tools may touch (every other one is rejected, see reach.py).
# Constructors chained through super() (__init__, __post_init__), read-only name strings used
# in error messages (__name__, __qualname__, __module__, __doc__) and value-protocol methods
# (__repr__, __str__, __eq__, __hash__, __len__). None of them reaches frames, globals,
# builtins, code objects or the class hierarchy, which is what sandbox escapes like
# ().__class__.__bases__[0].__subclasses__() need: going on from a method object takes
# __func__/__globals__/__code__, all rejected; and a method taken from a class must be called
# at once with self (reach.py), so Cls.__init__(os.path) cannot set attributes on a module.
DUNDER_ALLOWED: frozenset[str] = frozenset({
    "__init__", "__post_init__", "__name__", "__qualname__", "__module__", "__doc__",
    "__repr__", "__str__", "__eq__", "__hash__", "__len__",
})

# Non-dunder attributes that reach frames, code objects, other scopes' variables or raw
# memory: generator/coroutine frames, frame and traceback links, code internals, numpy's
# ctypes bridge and strided views (which read and write outside an array's buffer).
INTERNAL_ATTRS: frozenset[str] = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code",
    "ag_await", "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame",
    "tb_next", "co_code", "co_consts", "co_names", "ctypes", "as_strided", "get_field",
})

# Dunder names that, as a whole string literal, only serve attribute-by-name tricks.
DANGEROUS_DUNDER_STRINGS: frozenset[str] = frozenset({
    "__class__", "__bases__", "__base__", "__mro__", "__subclasses__", "__globals__",
    "__builtins__", "__code__", "__closure__", "__dict__", "__getattribute__", "__import__",
    "__reduce__", "__reduce_ex__", "__self__", "__func__", "__loader__", "__spec__",
}) | INTERNAL_ATTRS

# Attribute names that read the clock on any object (datetime, date, pandas.Timestamp).
CLOCK_ATTRS: frozenset[str] = frozenset({"now", "today", "utcnow"})
# Calls that parse the strings "now"/"today" into the current time.
CLOCK_PARSERS: frozenset[str] = frozenset(
    {"to_datetime", "Timestamp", "datetime64", "Period", "date_range", "period_range"})

# pandas readers allowed when their path follows the own-folder rule; other read_* are denied.
PANDAS_READERS: frozenset[str] = frozenset(
    {"read_csv", "read_table", "read_json", "read_parquet", "read_feather", "read_excel"})
PANDAS_PATH_KWARGS: tuple[str, ...] = ("filepath_or_buffer", "path_or_buf", "path", "io", "file")
# DataFrame/Series writers: denied when given a target (without one some return a string).
PANDAS_WRITERS: frozenset[str] = frozenset({
    "to_csv", "to_json", "to_parquet", "to_excel", "to_pickle", "to_feather", "to_hdf", "to_sql",
    "to_stata", "to_html", "to_latex", "to_markdown", "to_xml", "to_clipboard", "to_orc",
    "to_string", "to_gbq",
})
# numpy file I/O (np.load can unpickle, i.e. run code).
NUMPY_IO: frozenset[str] = frozenset({
    "load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt", "fromfile",
    "memmap", "fromregex", "DataSource",
})
