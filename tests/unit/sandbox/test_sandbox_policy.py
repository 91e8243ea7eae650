"""The AST policy rejects unsafe tool code before it runs, naming the line and construct."""

from __future__ import annotations

import textwrap

import pytest

from sopforge.sandbox import DEFAULT_ALLOWED, check_code

# The SOP-Bench format spec's example tools.py (research/sopbench_format.md §7).
SPEC_EXAMPLE = '''\
"""Mock tools for loan_triage: deterministic look-ups in this folder's CSV."""
import csv
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


class LoanTriageManager:
    def __init__(self):
        with open(os.path.join(_HERE, "test_set_with_outputs.csv"), newline="") as f:
            self._rows = {r["application_id"]: r for r in csv.DictReader(f)}

    def _row(self, application_id):
        if not application_id:
            raise ValueError("application_id is required")
        if application_id not in self._rows:
            raise ValueError(f"unknown application_id {application_id}")
        return self._rows[application_id]

    def getCreditScore(self, application_id):
        return {"credit_score": int(self._row(application_id)["credit_score"])}

    def process_tool_call(self, tool_name, tool_input):
        if tool_name == "getCreditScore":
            return self.getCreditScore(**tool_input)
        raise ValueError(f"Invalid tool_name: {tool_name}")
'''

HEADER = "import os\n_HERE = os.path.dirname(os.path.abspath(__file__))\n"  # lines 1-2


def failures(source: str, **kwargs) -> dict[str, str]:
    return {c.name.removeprefix("tools.policy."): c.message for c in check_code(source, **kwargs) if not c.passed}


def test_the_spec_example_passes_as_one_check():
    results = check_code(SPEC_EXAMPLE)
    assert [(c.name, c.passed) for c in results] == [("tools.policy", True)]


@pytest.mark.parametrize(("snippet", "kind", "construct"), [
    ("import subprocess", "processes", "import of 'subprocess'"),
    ("import socket", "network", "import of 'socket'"),
    ("import urllib.request", "network", "import of 'urllib.request'"),
    ("x = __import__('random').random() if False else 0\nimport random; y = random.random()", "randomness",
     "random.random"),
    ("import time; t = time.time()", "clock", "time.time"),
    ("from datetime import datetime; n = datetime.now()", "clock", "datetime.now"),
    ("e = os.environ['HOME']", "environment", "os.environ"),
    ("v = eval('1 + 1')", "dynamic_code", "use of 'eval'"),
    ("m = __import__('json')", "dynamic_code", "use of '__import__'"),
    ("f = open(os.path.join(_HERE, 'out.csv'), 'w')", "filesystem", "open(..., 'w')"),
    ("data = open('/etc/passwd').read()", "filesystem", "open('/etc/passwd')"),
])
def test_each_forbidden_construct_is_reported_with_its_line(snippet, kind, construct):
    source = HEADER + snippet + "\n"
    line = 3 + snippet.count("\n")  # the construct sits on the snippet's last line
    found = failures(source)
    assert kind in found, found
    assert f"line {line}: {construct} is not allowed" in found[kind]


def test_violations_are_grouped_one_check_per_kind():
    source = "import subprocess\nimport os\nos.system('ls')\nimport time\n"
    results = check_code(source)
    assert sorted(c.name for c in results) == ["tools.policy.clock", "tools.policy.processes"]
    processes = next(c for c in results if c.name == "tools.policy.processes")
    assert [v["line"] for v in processes.details["violations"]] == [1, 3]
    assert "line 1: import of 'subprocess'" in processes.message and "line 3: os.system" in processes.message


def test_a_verdict_is_kept_but_each_caller_gets_results_of_its_own():
    # Verdicts are kept per source (a run's checks judge the same files many times); callers prefix
    # their messages and add details, which must never reach the next caller.
    code = "import yaml\nimport subprocess\n"
    first = check_code(code)
    for result in first:
        result.message = "tools.py: " + result.message
        result.details["file"] = "tools.py"
    again = check_code(code)
    assert [r.name for r in again] == [r.name for r in first]
    assert not any(r.message.startswith("tools.py: ") or "file" in r.details for r in again)
    assert len(check_code(code, allowed_imports=DEFAULT_ALLOWED | {"yaml"})) == len(again) - 1  # another verdict


def test_a_syntax_error_is_a_failed_check_with_its_line():
    results = check_code("class M:\n    def f(self:\n        pass\n")
    assert len(results) == 1 and results[0].name == "tools.policy.syntax" and not results[0].passed
    assert results[0].message.startswith("line 2: syntax error")


@pytest.mark.parametrize("path", [
    "os.path.join(_HERE, 'data.csv')",
    "os.path.join(_HERE, 'data', 'rows.csv')",
    "_HERE + '/data.csv'",
    "f'{_HERE}/data.csv'",
    "os.path.join(os.path.dirname(os.path.realpath(__file__)), 'data.csv')",
    "DATA",
    "self.path",
])
def test_paths_anchored_at_the_module_folder_may_be_read(path):
    source = HEADER + textwrap.dedent(f"""\
        DATA = os.path.join(_HERE, "data.csv")
        class M:
            def __init__(self):
                self.path = os.path.join(_HERE, "x.csv")
                self.rows = open({path}, "r", newline="").read()
        """)
    assert failures(source) == {}


@pytest.mark.parametrize("path", [
    "os.path.join(os.path.dirname(_HERE), 'x.csv')",       # climbs out of the folder
    "os.path.join(_HERE, '..', 'x.csv')",                   # climbs out of the folder
    "os.path.join(_HERE, '/etc/passwd')",                   # absolute component wins
    "_HERE + 'x.csv'",                                      # sibling path '<folder>x.csv'
    "os.path.join(_HERE, name)",                            # computed file name
    "'test_set_with_outputs.csv'",                          # relative to the working directory
    "self.path",                                            # one assignment is not anchored
])
def test_other_paths_are_rejected(path):
    source = HEADER + textwrap.dedent(f"""\
        class M:
            def __init__(self, name="x.csv", path=None):
                self.path = os.path.join(_HERE, "x.csv")
                if path:
                    self.path = path
                self.rows = open({path}).read()
        """)
    found = failures(source)
    assert list(found) == ["filesystem"] and "line 8: open(" in found["filesystem"]


def test_interpreter_internals_are_rejected_but_ordinary_dunders_are_not():
    bad = failures("x = ().__class__.__bases__[0]\ny = getattr(x, '__sub' + 'classes__')\n")
    assert "line 1: attribute '__class__'" in bad["dynamic_code"]
    assert "line 2: getattr(..., '__subclasses__')" in bad["dynamic_code"]
    ok = textwrap.dedent("""\
        class Base:
            pass
        class M(Base):
            def __init__(self):
                super().__init__()
                self.__cache = {}
            def process_tool_call(self, tool_name, tool_input):
                method = {"getX": self.getX}[tool_name]
                return {"kind": type(self).__name__, "value": method(**tool_input)}
            def getX(self):
                return 1
        """)
    assert failures(ok) == {}


# Issue 10, class 1: each of these talked the old policy round (attribute assignment to
# allowed modules, computed attribute names reaching dunders) or is a close variant.
@pytest.mark.parametrize(("snippet", "construct"), [
    ("os.path.realpath = lambda p: p", "assignment to attribute 'os.path.realpath'"),
    ("import json\njson.dumps = str", "assignment to attribute 'json.dumps'"),
    ("import json\njson.dumps += 1", "assignment to attribute 'json.dumps'"),
    ("import json\ndel json.dumps", "assignment to attribute 'json.dumps'"),
    ("import json\nsetattr(json, 'dumps', str)", "setattr(json, 'dumps', ...)"),
    ("x = getattr(os, ''.join(['sys', 'tem']))", "getattr() with a computed name"),
    ("n = 'path'\nx = getattr(os, n)", "getattr() with a computed name"),
    ("x = hasattr(os, str(1))", "hasattr() with a computed name"),
    ("import functools\nf = functools.partial(getattr, os)", "'getattr' used as a value"),
    ("x = ().__class__", "attribute '__class__'"),
    ("x = (1).__class__.__mro__", "attribute '__mro__'"),
    ("x = type(()).__subclasses__", "attribute '__subclasses__'"),
    ("def f():\n    pass\ng = f.__globals__", "attribute '__globals__'"),
    ("x = os.__dict__", "attribute '__dict__'"),
    ("g = (i for i in [1])\nx = g.gi_frame.f_back", "attribute 'gi_frame'"),
    ("import operator\nget = operator.attrgetter('__class__')", "operator.attrgetter('__class__')"),
    ("import operator\nget = operator.attrgetter(''.join('ab'))", "operator.attrgetter(''.join('ab'))"),
    ("import string\nf = string.Formatter()", "string.Formatter"),
    ("import typing\nh = typing.get_type_hints(int)", "typing.get_type_hints"),
    ("def f(x: \"__import__('os')\"):\n    pass", "annotation"),
    ("import json\nx = json.decoder._CONSTANTS", "json.decoder._CONSTANTS"),
    ("from json import _default_decoder", "import of 'json._default_decoder'"),
    ("import numpy as np\nv = np.lib.stride_tricks.as_strided", "numpy.lib.stride_tricks"),
    ("import json\njson.__dict__['dumps'] = str", "attribute '__dict__'"),
])
def test_code_cannot_reach_objects_it_did_not_create(snippet: str, construct: str):
    found = failures(HEADER + snippet + "\n")
    assert construct in found.get("dynamic_code", "") + found.get("native_code", ""), found


def test_a_method_taken_from_the_class_cannot_patch_a_module():
    # Cls.method(os.path, ...) runs a method whose "self" is a module: self.x = ... would patch it.
    source = HEADER + textwrap.dedent("""\
        class Patcher:
            def patch(self, value):
                self.realpath = value
        Patcher.patch(os.path, str)
        alias = Patcher
        kind = type(Patcher())
        kind.patch(os.path, str)
        """)
    found = failures(source)["dynamic_code"]
    assert "line 6: method 'Patcher.patch' taken from the class" in found
    assert "line 7: class 'Patcher' used as a value" in found
    assert "line 8: type(Patcher()) used as a value" in found


def test_own_objects_may_be_changed_and_classes_used_as_intended():
    source = HEADER + textwrap.dedent("""\
        class ToolError(ValueError):
            pass
        class Base:
            LIMIT = 3
            def __init__(self):
                self.rows = {}
        class Manager(Base):
            def __init__(self):
                Base.__init__(self)
                super().__init__()
                self.count = 0
                self.count += 1
                def bump():
                    self.count += 1
                bump()
                setattr(self, "seen", True)
            def check(self, value):
                if not isinstance(value, (Base, dict)) or type(value) is int:
                    raise ToolError(f"{type(self).__name__}: bad {value!r} (limit {Manager.LIMIT})")
                try:
                    return self.rows[value]
                except (ToolError, KeyError):
                    return None
        _shared = Manager()
        _shared.count = 2
        """)
    assert failures(source) == {}


def test_shadowed_builtin_names_are_not_confused_with_the_builtins():
    shadowed = "def call(input, type):\n    return input['x'] + type\n"
    assert failures(shadowed) == {}
    assert "line 2: use of 'input'" in failures("def call():\n    return input('x')\n")["interactive"]
    # Builtins that reach code, files or attributes may not be shadowed at all (issue 20):
    # `exec = exec` and `def f(open=open)` made every later use look like the module's own name.
    assert "binding the name 'vars'" in failures("def call(input, vars):\n    return vars\n")["dynamic_code"]


def test_caller_may_allow_sibling_modules_but_never_denied_ones():
    assert "imports" in failures("import tools\n")
    assert failures("import tools\n", allowed_imports=DEFAULT_ALLOWED | {"tools"}) == {}
    assert "randomness" in failures("import random\n", allowed_imports=DEFAULT_ALLOWED | {"random"})


@pytest.mark.parametrize(("snippet", "kind"), [
    ("df = pd.read_pickle(os.path.join(_HERE, 'x.pkl'))", "dynamic_code"),
    ("pd.DataFrame().to_csv(os.path.join(_HERE, 'out.csv'))", "filesystem"),
    ("df = pd.read_csv('https://example.com/x.csv')", "filesystem"),
    ("rows = pd.DataFrame({'a': [1, 2]}).sample(1)", "randomness"),
    ("when = pd.to_datetime('today')", "clock"),
    ("noise = np.random.rand(3)", "randomness"),
])
def test_pandas_and_numpy_escape_hatches_are_rejected(snippet, kind):
    source = HEADER + "import pandas as pd\nimport numpy as np\n" + snippet + "\n"
    assert "line 5:" in failures(source).get(kind, ""), failures(source)


def test_pandas_reads_of_own_data_and_seeded_sampling_pass():
    source = HEADER + textwrap.dedent("""\
        import pandas as pd
        df = pd.read_csv(os.path.join(_HERE, "test_set_with_outputs.csv"), dtype=str)
        text = df.to_csv(index=False)
        picked = df.sample(2, random_state=0)
        """)
    assert failures(source) == {}


# Issue 20, item 5: each bypass of the issue, and the other members of its class.
@pytest.mark.parametrize("source", [
    "exec = exec\nexec('1')\n",
    "def f(open=open):\n    return open('/etc/passwd').read()\n",
    "[0 for open in [1]]\n",
    "for getattr in [len]:\n    pass\n",
    "(compile := len)\n",
    "import os as open\n",
    "from operator import attrgetter as getattr\n",
    "def eval():\n    pass\n",
    "class setattr:\n    pass\n",
    "try:\n    pass\nexcept Exception as globals:\n    pass\n",
    "match 1:\n    case open:\n        pass\n",
    "match {}:\n    case {**vars}:\n        pass\n",
    "with len as open:\n    pass\n",
    "lambda open: open\n",
    "class C:\n    __match_args__ = ('__se' + 'lf__',)\n",
])
def test_builtins_that_reach_code_files_or_attributes_are_never_rebound(source: str):
    assert "binding the name" in failures(source).get("dynamic_code", ""), failures(source)


@pytest.mark.parametrize(("source", "message"), [
    ("match print:\n    case object(__self__=b):\n        pass\n", "class pattern reading '__self__'"),
    ("match x:\n    case object(gi_frame=f):\n        pass\n", "class pattern reading 'gi_frame'"),
    ("import operator\nm = operator.methodcaller\n", "'operator.methodcaller' used as a value"),
    ("from operator import attrgetter\nfns = [attrgetter]\n", "'operator.attrgetter' used as a value"),
    ("import operator as op\nop.methodcaller('format', 1)\n", "methodcaller('format')"),
    ("def f(g=getattr):\n    return g\n", "'getattr' used as a value"),
    ("import operator\ngetattr(operator, 'attrgetter')\n", "getattr(..., 'attrgetter')"),
    ("getattr('{0.x}', 'format')(1)\n", "getattr(..., 'format')"),
    ("def f(): pass\nx = ('{0._' + '_globals__}').format(f)\n", "a format field reading '__globals__'"),
    ("x = f'{{0.{1}}}'.format(2)\n", "format"),
    ("t = ''.join(['{0.', 'x}'])\nt.format(1)\n", "'.format' on t"),
    ("x = '{0:{1._private}}'.format(1, 2)\n", "a format field reading '_private'"),
    ("x = '{a.__class__}'.format_map({'a': 1})\n", "a format field reading '__class__'"),
    ("f = 'x'.format\n", "'.format' on 'x'"),
    ("str.format('{0.__class__}', 1)\n", "'.format' on str"),
])
def test_attribute_reach_through_patterns_operator_and_format_is_refused(source: str, message: str):
    found = failures(source).get("dynamic_code", "")
    assert message in found, found


@pytest.mark.parametrize("source", [
    "x = '{0} and {1.name} {a[b]:>{w}}'.format(1, 2, a={}, w=3)\n",
    "x = ('{0}' + ' {1}').format(1, 2)\n",
    "import operator\nkey = operator.attrgetter('name')\nby = operator.itemgetter('a')\n",
    "def call(input, type, data):\n    return input\n",
    "match {'a': 1}:\n    case {'a': value}:\n        pass\n    case str(x) if x:\n        pass\n",
])
def test_ordinary_formatting_matching_and_naming_still_pass(source: str):
    assert failures(source) == {}
