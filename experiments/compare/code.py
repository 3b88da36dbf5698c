"""The code an arm's curves depend on, as a digest for the arm's cache key.

An arm kept in ``RUN_DIR/arms`` is reused only by the code that ran it: a change to a sampler
reruns the arms that draw with it, a change to the engine, the policy or the study runner
reruns every arm. Each module counts by its syntax tree without docstrings, so comments,
docstrings and layout do not count.

Each file is read once per process (about 0.3 s for the whole tree): the digest stands for the
code the process imported, not for an edit made while it runs (the study runner takes every
arm's digest before any arm runs).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import os
from collections.abc import Mapping
from typing import Any

import curriculax
import experiments
from curriculax import _config
from curriculax._config import expand_preset

# Modules one arm may run and another not: an arm's digest holds those its curriculum names
# (with the modules of these packages they import); every other module of the two packages
# (``curriculax.samplers`` and ``curriculax.gates`` themselves too) is shared by all arms.
PER_ARM = ("curriculax.samplers.", "curriculax.gates.")
PACKAGES = (curriculax, experiments)


def arm_code_digest(curriculum: Mapping[str, Any] | None, *, oracle: bool = False) -> str:
    """The digest of the code an arm runs: the shared modules, and the modules of the sampler
    and gate types its curriculum tables name (a preset written out; the default sampler where
    none is named) or, for an oracle arm (``oracle=True``, its gates in ``curriculum``), of the
    oracle, with the per-arm modules those import.

    Raises:
      ValueError: a type no registry holds and no import path names (as building it would).
    """
    start = _named_modules(expand_preset(curriculum or {}), oracle=oracle)
    h = hashlib.sha256(_shared_digest().encode())
    for name in sorted(_closure(start)):
        h.update(f"\n{name}:{_file_digest(_source(name))}".encode())
    return h.hexdigest()[:16]


def _named_modules(curriculum: Mapping[str, Any], *, oracle: bool) -> set[str]:
    """The modules that define the arm's sampler (its ``inner`` ones too) and gates."""
    found = {"experiments._oracle"} if oracle else set()
    spec = None if oracle else curriculum.get("sampler", {"type": "sequential"})
    while isinstance(spec, Mapping):
        found.add(_module_of("sampler", _config._SAMPLERS, spec.get("type")))
        spec = spec.get("inner")
    for spec in (curriculum.get("gates") or {}).values():
        if isinstance(spec, Mapping):
            found.add(_module_of("gate", _config._GATES, spec.get("type")))
    return found


def _module_of(kind: str, table: Mapping, type_name: Any) -> str:
    factory = _config._resolve(kind, table, type_name, f"curriculum {kind}")
    if ":" in type_name:  # a user's factory: its module as the type names it
        return type_name.partition(":")[0]
    return inspect.getmodule(factory).__name__


def _closure(names: set[str]) -> set[str]:
    """``names`` and the per-arm modules they import, directly or through each other (a
    user's sampler module counts, with the per-arm modules it imports, not its other ones)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen or _source(name) is None:
            continue
        seen.add(name)
        todo.extend(n for n in _imports(name) if n.startswith(PER_ARM))
    return seen


@functools.cache
def _imports(name: str) -> frozenset[str]:
    """The modules ``name``'s source imports anywhere (also inside functions), ``from
    package import module`` read as that module where it is one (none where the source does
    not parse: its text counts, see :func:`_file_digest`)."""
    path = _source(name)
    tree = _parse(path)
    if tree is None:
        return frozenset()
    package = name if os.path.basename(path) == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return frozenset(n for n in found if _source(n) is not None)


@functools.cache
def _source(name: str) -> str | None:
    """The source file of module ``name``, or None (no such module, or not Python source)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return origin if origin and origin.endswith(".py") and os.path.isfile(origin) else None


@functools.cache
def _shared_digest() -> str:
    h = hashlib.sha256()
    for package in PACKAGES:
        root = os.path.dirname(package.__file__)
        top = os.path.dirname(root)
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for file in sorted(f for f in files if _module_file(folder, f)):
                path = os.path.join(folder, file)
                module = os.path.relpath(path, top)[: -len(".py")].replace(os.sep, ".")
                # the per-arm packages' __init__ counts for every arm: the study reads what
                # it binds (``cx.samplers.noisy_tasks``, say) whatever the arm runs
                if module.startswith(PER_ARM) and file != "__init__.py":
                    continue
                h.update(f"\n{module}:{_file_digest(path)}".encode())
    return h.hexdigest()


def _module_file(folder: str, name: str) -> bool:
    """Whether ``name`` in ``folder`` is a module Python would import: a ``.py`` file with an
    identifier for a name (not an editor's lock or backup file, a link to nowhere)."""
    stem = name[: -len(".py")]
    return (
        name.endswith(".py") and stem.isidentifier() and os.path.isfile(os.path.join(folder, name))
    )


def _parse(path: str) -> ast.Module | None:
    """The file's syntax tree, or None where it does not parse (a file being edited)."""
    with open(path, "rb") as f:
        try:
            return ast.parse(f.read(), path)
        except (SyntaxError, ValueError):
            return None


@functools.cache
def _file_digest(path: str) -> str:
    """The digest of the file's syntax tree without docstrings (read once per process); of its
    bytes where it does not parse."""
    tree = _parse(path)
    if tree is None:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()
