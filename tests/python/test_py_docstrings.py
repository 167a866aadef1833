"""Every public name of the package has a docstring (issue 33): the walk
covers every module of attn (pkgutil; private _modules only through what the
public ones export), each public function and class, and each public method
and property a class defines itself (inherited ones are documented where
they are defined). help() then shows attn's text, not nn.Module's."""
import inspect
import pkgutil

import attn


def public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for n in names:
        obj = getattr(module, n)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if names is getattr(module, "__all__", None) or obj.__module__ == module.__name__:
                yield f"{module.__name__}.{n}", obj


def members(cls):
    for n, obj in vars(cls).items():
        if n.startswith("_") and n != "__init__" or n == "__init__":
            continue
        if inspect.isfunction(obj) or isinstance(obj, (property, classmethod, staticmethod)):
            yield n, obj


def undocumented():
    modules = [attn] + [__import__(f"attn.{m.name}", fromlist=["_"])
                        for m in pkgutil.iter_modules(attn.__path__) if not m.name.startswith("_")]
    seen, missing = set(), []
    for module in modules:
        if not (module.__doc__ or "").strip():
            missing.append(module.__name__)
        for name, obj in public_names(module):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if not (obj.__doc__ or "").strip():
                missing.append(name)
            if inspect.isclass(obj) and obj.__module__.startswith("attn"):
                for m, f in members(obj):
                    f = getattr(f, "fget", None) or getattr(f, "__func__", f)
                    if not (f.__doc__ or "").strip():
                        missing.append(f"{name}.{m}")
    return modules, missing


def test_every_public_name_has_a_docstring():
    modules, missing = undocumented()
    assert {"attn.torch", "attn.gpt", "attn.modules"} <= {m.__name__ for m in modules}
    assert not missing, f"{len(missing)} public names without a docstring: {missing}"


def test_the_walk_finds_a_missing_one():
    class Bare:
        def method(self):
            pass
    Bare.__module__ = "attn.fake"
    assert [n for n, _ in members(Bare)] == ["method"] and not Bare.method.__doc__
