#!/usr/bin/env python3
"""Function lengths in C sources (clang-formatted: a definition starts at
column 0 and its body closes with "}" at column 0). Lines counted from the
signature's first line to the closing brace.

usage: function_lengths.py [--over N] [--max N] FILE_OR_DIR...
  --over N   list the functions longer than N lines (default 60)
  --max N    exit 1 when any function is longer than N lines
"""
import os
import re
import sys

SIG = re.compile(r"^[A-Za-z_][^;#]*\b([A-Za-z_]\w*)\s*\(")


def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = SIG.match(lines[i])
        if m and not lines[i].startswith(("typedef", "struct", "enum", "union", "static const",
                                          "const ")) or (m and "(" in lines[i] and "=" not in
                                                         lines[i].split("(")[0]):
            # the body opens on this line or a following signature line
            j = i
            while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and "=" not in lines[i].split("(")[0]:
                k = j + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                out.append((m.group(1), i + 1, k - i + 1))
                i = k + 1
                continue
        i += 1
    return out


def main(argv):
    over, limit, paths = 60, None, []
    it = iter(argv[1:])
    for a in it:
        if a == "--over":
            over = int(next(it))
        elif a == "--max":
            limit = int(next(it))
        else:
            paths.append(a)
    files = []
    for p in paths:
        if os.path.isdir(p):
            for d, _, fs in os.walk(p):
                files += [os.path.join(d, f) for f in fs if f.endswith((".c", ".cu"))]
        else:
            files.append(p)
    rows = []
    for f in sorted(files):
        rows += [(n, f, line, length) for n, line, length in functions(f)]
    rows.sort(key=lambda r: -r[3])
    longest = rows[0][3] if rows else 0
    listed = [r for r in rows if r[3] > over]
    for n, f, line, length in listed:
        print("%5d  %s:%d  %s" % (length, f, line, n))
    print("%d functions, %d over %d lines, longest %d" % (len(rows), len(listed), over, longest))
    if limit is not None and longest > limit:
        print("FAIL: %d function(s) over %d lines" % (sum(r[3] > limit for r in rows), limit))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
