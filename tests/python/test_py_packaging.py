"""Packaging: `import attn` without numpy and `import attn.torch` without
PyTorch name the package to install (a fake failing module on sys.path
stands in for the missing one); the library is looked for inside the package
first (where `pip install .` puts it). pip itself: tests/python/pip_install.sh."""
import os
import subprocess
import sys

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def import_with_missing(tmp_path, missing, statement):
    fake = tmp_path / missing
    fake.mkdir()
    (fake / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{missing}'\", "
                                      f"name='{missing}')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path),
                                                       os.path.join(SRC, "python")]))
    return subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True,
                          env=env, cwd=tmp_path)


@pytest.mark.parametrize("missing, statement, hint", [
    ("numpy", "import attn", "attn needs numpy"),
    ("torch", "import attn.torch", "attn.torch needs PyTorch"),
])
def test_a_missing_package_is_named(tmp_path, missing, statement, hint):
    r = import_with_missing(tmp_path, missing, statement)
    assert r.returncode != 0
    assert hint in r.stderr and f"pip install {missing}" in r.stderr, r.stderr
    assert f"apt-get install python3-{missing}" in r.stderr


def test_library_inside_the_package_comes_first(monkeypatch):
    from attn import _lib
    monkeypatch.delenv("ATTN_LIBRARY", raising=False)
    first = _lib._candidates()[0]
    assert first == os.path.join(SRC, "python", "attn", "libattn.so")


def test_pyproject_names_the_package_and_the_build_step():
    text = open(os.path.join(SRC, "pyproject.toml")).read()
    assert 'build-backend = "setuptools.build_meta"' in text and 'packages = ["attn"]' in text
    assert "BuildPyWithLibrary" in open(os.path.join(SRC, "setup.py")).read()


def _package_imports():
    """{module: the package's modules it imports}, at any depth of the file
    (a function-level import is an edge too: it only hides a cycle)."""
    import ast
    pkg = os.path.join(SRC, "python", "attn")
    names = {f[:-3] for f in os.listdir(pkg) if f.endswith(".py")}
    edges = {}
    for n in names:
        tree = ast.parse(open(os.path.join(pkg, n + ".py"), encoding="utf-8").read())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    out.add(node.module.split(".")[0])
                else:
                    out.update(a.name for a in node.names)
        edges[n] = {m for m in out if m in names and m != n}
    return edges


def test_the_package_modules_form_no_cycle():
    """issue 48: no two modules of attn import each other, directly or
    around a circle (attn.torch re-exports; the classes live below it)."""
    edges = _package_imports()
    state = {}

    def visit(n, path):
        state[n] = 1
        for m in sorted(edges[n]):
            assert state.get(m) != 1, f"import cycle: {' -> '.join(path + [n, m])}"
            if m not in state:
                visit(m, path + [n])
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n, [])
    assert "_torch_modules" in edges["_torch_gpt"]  # the walk sees the imports
