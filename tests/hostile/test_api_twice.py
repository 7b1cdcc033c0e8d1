"""The Python API answers every time, whatever was imported first (issue 40, finding 11).

`triage.classify(text)` used to be a function of the package that the first call replaced
with the `triage.classify` subpackage (the import system binds a subpackage on its parent),
so every later call raised `TypeError: 'module' object is not callable`. Each check runs in a
fresh interpreter, since the bug lived in what a process had imported before.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import CORPUS, ROOT

LOG = CORPUS / "cases" / "job-zero3-train-then-stage2-load.log"

# What a script, a notebook or a log pipeline may have imported before its first call.
IMPORT_ORDERS = [
    "import triage",
    "import triage.classify",
    "import triage.classify.classifier",
    "from triage.classify import classifier",
    "from triage.classify.classifier import classify",
    "import triage.cli, triage.stream.http",
]

_TWICE = """
import json, sys
{order}
import triage
text = open(sys.argv[1]).read()
answers = []
for _ in range(2):
    report = triage.classify(text)
    answers.append(report.hypotheses[0].rule.id if report.hypotheses else None)
print(json.dumps(answers))
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("order", IMPORT_ORDERS)
def test_classify_answers_twice_in_one_process(order):
    first, second = json.loads(_run(_TWICE.format(order=order), str(LOG)))
    assert first is not None, "the real failing log fired no rule"
    assert first == second


_PUBLIC = """
import importlib, json, pathlib, pkgutil
# Each package's public callables as its own __init__ leaves them, before any of its modules
# is imported (a parent comes before its subpackages in this order).
packages = sorted(".".join(p.parent.parts) for p in pathlib.Path("triage").rglob("__init__.py"))
def public(name):
    module = importlib.import_module(name)
    return {k: id(v) for k, v in vars(module).items()
            if not k.startswith("_") and callable(v) and not isinstance(v, type)
            and getattr(v, "__module__", name) == name}
before = {name: public(name) for name in packages}
import triage
for m in pkgutil.walk_packages(triage.__path__, "triage."):
    if not m.name.endswith(".__main__"):
        importlib.import_module(m.name)
after = {name: {k: id(getattr(importlib.import_module(name), k, None)) for k in names}
         for name, names in before.items()}
print(json.dumps({"before": before, "after": after}))
"""


def test_no_public_callable_of_a_package_is_replaced_by_an_import():
    """Every public callable a package's `__init__` defines is the same object after every
    module of the package has been imported (a submodule of the same name would replace it)."""
    seen = json.loads(_run(_PUBLIC))
    assert seen["before"]["triage"], "triage.classify is no longer found as the package's public callable"
    assert seen["after"] == seen["before"]
