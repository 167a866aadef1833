#!/usr/bin/env python3
"""The layer rule of src/ (docs/library.md#layers): a folder uses only its own
and lower folders, and no two files form a cycle.

Edges come from three sources:
- every `#include "..."` in src/ (a private header belongs to its folder; a
  public header `attn/x.h` to the one folder that defines its functions);
- every `#include "attn/..."` in a public header (include/attn/), from the
  header's folder;
- every reference from one object file to a symbol another defines (`nm` of
  the build's objects: calls, and function pointers in tables).

usage: layers.py SRC_DIR BUILD_DIR [--report]    check the tree, exit 1 on a violation
       layers.py --self-test                     the checker on planted violations
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".inc")


def layer_order(root):
    """The order is written once, in CMakeLists.txt's ATTN_LAYERS."""
    text = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"set\(ATTN_LAYERS ([a-z ]+)\)", text)
    if not m:
        sys.exit("layers: CMakeLists.txt has no set(ATTN_LAYERS ...)")
    return m.group(1).split()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def source_files(src):
    out = []
    for d, _, files in os.walk(src):
        for f in files:
            if f.endswith(SOURCE_EXT):
                out.append(os.path.relpath(os.path.join(d, f), src))
    return sorted(out)


def symbols(build, src_rel_files):
    """{file: (defined, undefined)} from nm over every object built from src/."""
    out = {}
    wanted = set(src_rel_files)
    for d, _, files in os.walk(os.path.join(build, "CMakeFiles")):
        for f in files:
            if not f.endswith(".o"):
                continue
            path = os.path.join(d, f)
            i = path.find("/src/")
            if i < 0:
                continue
            rel = path[i + 5:-2]  # "base/status.c"
            if rel not in wanted:
                continue
            nm = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
            defined, undefined = out.setdefault(rel, (set(), set()))
            for line in nm.splitlines():
                p = line.split()
                if len(p) == 3 and p[1] in "TDBRCVW":
                    defined.add(p[2])
                elif len(p) == 2 and p[0] == "U":
                    undefined.add(p[1])
    return out


def build_graph(src, include_dir, syms):
    """File-level edges {(a, b): why} and the folder of every file."""
    files = source_files(src)
    folder = {f: f.split(os.sep)[0] for f in files}
    definer = {}
    for f, (defined, _) in syms.items():
        for s in defined:
            definer.setdefault(s, set()).add(f)
    edges = {}
    for f, (_, undefined) in syms.items():
        for s in sorted(undefined):
            for g in definer.get(s, ()):
                if g != f:
                    edges.setdefault((f, g), "calls " + s)
    # Public headers: owned by the folder that defines their functions.
    owner, problems = {}, []
    if include_dir and os.path.isdir(include_dir):
        for h in sorted(os.listdir(include_dir)):
            text = strip_comments(open(os.path.join(include_dir, h), encoding="utf-8").read())
            names = set(re.findall(r"\b(attn_\w+)\s*\(", text))
            homes, where = collections.Counter(), collections.defaultdict(list)
            for n in sorted(names):
                for g in definer.get(n, ()):
                    homes[folder[g]] += 1
                    where[folder[g]].append(n)
            if len(homes) > 1:
                main = homes.most_common(1)[0][0]
                problems.append("include/attn/%s (%s/) declares functions of other folders: %s" %
                                (h, main, "; ".join("%s/: %s" % (f, ", ".join(where[f]))
                                                    for f in sorted(where) if f != main)))
            if homes:
                owner["attn/" + h] = homes.most_common(1)[0][0]
        # A public header's own includes are its folder's edges too.
        for h in sorted(os.listdir(include_dir)):
            me = "attn/" + h
            if me not in owner:
                continue
            text = strip_comments(open(os.path.join(include_dir, h), encoding="utf-8").read())
            for inc in re.findall(r'#\s*include\s+"(attn/[^"]+)"', text):
                if inc in owner and owner[inc] != owner[me]:
                    edges.setdefault(("<" + me + ">", "<" + inc + ">"), "includes " + inc)
                    folder["<" + me + ">"], folder["<" + inc + ">"] = owner[me], owner[inc]
    for f in files:
        text = strip_comments(open(os.path.join(src, f), encoding="utf-8").read())
        for inc in re.findall(r'#\s*include\s+"([^"]+)"', text):
            if inc.startswith("attn/"):
                if inc in owner and owner[inc] != folder[f]:
                    edges.setdefault((f, "<" + inc + ">"), "includes " + inc)
                    folder["<" + inc + ">"] = owner[inc]
                continue
            here = os.path.normpath(os.path.join(os.path.dirname(f), inc))
            target = here if here in folder else os.path.normpath(inc)
            if target not in folder:
                problems.append("%s includes %s, which is not in src/" % (f, inc))
                continue
            if target != f:
                edges.setdefault((f, target), "includes " + inc)
    return files, folder, edges, problems


def sccs(nodes, edges):
    """Tarjan's strongly connected components with more than one node."""
    adj = collections.defaultdict(list)
    for a, b in edges:
        adj[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check(src, include_dir, order, syms, report=False):
    """Returns the list of violations (empty: the tree keeps the rule)."""
    files, folder, edges, problems = build_graph(src, include_dir, syms)
    rank = {name: i for i, name in enumerate(order)}
    for f in files:
        if os.sep not in f:
            problems.append("%s is directly in src/: every file belongs to a layer folder" % f)
        elif folder[f] not in rank:
            problems.append("%s: folder %s/ is not a layer (CMakeLists.txt ATTN_LAYERS)" %
                            (f, folder[f]))
    for d in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, d)) and d not in rank:
            problems.append("src/%s/ is not a layer (CMakeLists.txt ATTN_LAYERS)" % d)
    upward, folder_edges = [], set()
    for (a, b), why in sorted(edges.items()):
        fa, fb = folder.get(a), folder.get(b)
        if fa not in rank or fb not in rank or fa == fb:
            continue
        folder_edges.add((fa, fb))
        if rank[fa] < rank[fb]:
            upward.append("upward: %s (%s) %s, in %s (%s)" % (a, fa, why, b, fb))
    problems += upward
    for comp in sccs(set(rank), folder_edges):
        problems.append("cycle between folders: " + " <-> ".join(comp))
    for name in order:
        inside = {(a, b) for (a, b) in edges if folder.get(a) == name and folder.get(b) == name}
        for comp in sccs({f for f in files if folder[f] == name}, inside):
            problems.append("cycle inside %s/: %s" % (name, " <-> ".join(comp)))
    if report:
        per = collections.Counter(folder[f] for f in files if folder[f] in rank)
        print("layers: %d files, %d edges; files per folder: %s" %
              (len(files), len(edges), ", ".join("%s %d" % (n, per[n]) for n in order)))
        print("layers: %d upward edges, %d folder cycles, %d file cycles" % (
            len(upward), sum(p.startswith("cycle between") for p in problems),
            sum(p.startswith("cycle inside") for p in problems)))
    return problems


def self_test():
    """Plant each kind of violation in a scratch tree; the checker must see it."""
    order = ["base", "nn", "model"]
    cases = {
        "clean": ({"base/a.c": "", "nn/b.c": '#include "base/a.h"\n', "base/a.h": ""}, {}, 0),
        "upward include": ({"base/a.c": '#include "model/m.h"\n', "model/m.h": ""}, {}, 1),
        "upward call": ({"base/a.c": "", "model/m.c": ""},
                        {"base/a.c": ({"f"}, {"g"}), "model/m.c": ({"g"}, set())}, 1),
        "file cycle": ({"nn/a.c": "", "nn/b.c": ""},
                       {"nn/a.c": ({"f"}, {"g"}), "nn/b.c": ({"g"}, {"f"})}, 1),
        "loose file": ({"x.c": ""}, {}, 1),
        "unknown folder": ({"misc/x.c": ""}, {}, 1),
        "commented include ignored": ({"base/a.c": '/* #include "model/m.h" */\n',
                                       "model/m.h": ""}, {}, 0),
    }
    failed = 0
    for name, (tree, syms, want) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for rel, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)) or d, exist_ok=True)
                open(os.path.join(d, rel), "w").write(text)
            got = check(d, None, order, syms)
            ok = (len(got) > 0) == (want > 0)
            failed += not ok
            print("self-test %-28s %s%s" % (name, "ok" if ok else "FAILED", "" if ok else
                                            " (got %s)" % got))
    return failed


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return 1 if self_test() else 0
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, build = argv[1], argv[2]
    src = os.path.join(root, "src")
    order = layer_order(root)
    files = source_files(src)
    syms = symbols(build, [f for f in files if f.endswith((".c", ".cu"))])
    missing = [f for f in files if f.endswith(".c") and f not in syms]
    if not any(f.startswith(("base/", "model/")) for f in syms):
        print("layers: no objects under %s: build first" % build, file=sys.stderr)
        return 2
    problems = check(src, os.path.join(root, "include", "attn"), order, syms, report=True)
    for f in missing:
        print("layers: note: %s has no object in this build (its calls are not checked)" % f)
    for p in problems:
        print("layers: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
