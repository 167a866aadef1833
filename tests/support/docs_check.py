"""The documentation's static checks, for tests/readme_examples.sh.

    python3 docs_check.py ROOT OUT

Reads ROOT/README.md and every ROOT/docs/*.md (the pages, in that order),
prints one line per problem ("PAGE:LINE: what") and exits 1 if there is one:
  - a ```sh, ```python or ```c block (or an alias: bash, shell, py) without a
    marker on the line before it: <!-- readme-test: run -->, <!-- readme-test:
    skip (why) --> or <!-- readme-test: file NAME --> (the block is the file
    NAME, written into the page's folder when its turn comes); only sh and
    python blocks run; an unterminated block;
  - a relative link ([text](path), ![alt](path), [ref]: path) to a path that
    is not a file or folder of the repository (tracked, or untracked and not
    ignored, when ROOT is a git work tree), or one outside it, or to a
    #section that is not a heading of the page it names;
  - a README longer than README_MAX_LINES, a page of docs/ that the README
    does not link, a page without a "# " title on its first line.
It writes each marked block to OUT/PP/NN.KIND (PP the page's number, KIND
run, skip or file), headed by "# PAGE:LINE LANG [NAME]", and the page list
to OUT/pages (one "PP PAGE" a line)."""
import glob
import os
import re
import subprocess
import sys

README_MAX_LINES = 160
LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "py", "py": "py", "c": "c"}
MARKER = re.compile(r"<!-- readme-test: (run|skip \(.+\)|file ([\w.-]+(?:/[\w.-]+)*)) -->")
LINK = re.compile(r"!?\[((?:[^\]\\]|\\.)*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def slug(heading):
    """GitHub's anchor for a heading: links reduced to their text, lower case,
    punctuation dropped (letters, digits, _ and - stay), spaces to hyphens."""
    text = re.sub(r"\[((?:[^\]\\]|\\.)*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


class Page:
    def __init__(self, root, rel):
        self.rel = rel
        self.lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
        self.blocks = []  # (line, lang, marker or None, body)
        self.problems = []
        prose = list(self.lines)  # the page with its fenced blocks blanked out
        i = 0
        while i < len(self.lines):
            s = self.lines[i].strip()
            if s.startswith("```"):
                lang = s[3:].strip().lower()
                j = i + 1
                while j < len(self.lines) and self.lines[j].strip() != "```":
                    j += 1
                if j == len(self.lines):
                    self.problems.append(f"{rel}:{i + 1}: a ``` block that never ends")
                prev = self.lines[i - 1].strip() if i else ""
                m = MARKER.fullmatch(prev)
                self.blocks.append((i + 1, lang, m, "\n".join(self.lines[i + 1:j]) + "\n"))
                for k in range(i, min(j + 1, len(self.lines))):
                    prose[k] = ""
                i = j
            i += 1
        self.prose = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), "\n".join(prose))
        seen = {}
        self.anchors = set()
        for line in prose:
            h = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h:
                a = slug(h.group(1))
                n = seen.get(a, 0)
                seen[a] = n + 1
                self.anchors.add(a if n == 0 else f"{a}-{n}")

    def links(self):
        """(line, target) of every link in the prose."""
        for rx in (LINK, REFDEF):
            for m in rx.finditer(self.prose):
                target = m.group(m.lastindex)
                yield self.prose.count("\n", 0, m.start(m.lastindex)) + 1, target


def repo_paths(root):
    """The files and folders a clone would have (tracked, or untracked and not
    ignored: what `git add -A` would commit); None outside a git work tree."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard", "--full-name"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    if os.path.realpath(top) != os.path.realpath(root):
        return None
    paths = {""}
    for f in filter(None, out.split("\0")):
        if not os.path.lexists(os.path.join(root, f)):
            continue  # deleted in the work tree
        paths.add(f)
        d = os.path.dirname(f)
        while d:
            paths.add(d)
            d = os.path.dirname(d)
    return paths


def main(root, out):
    rels = ["README.md"] + sorted(os.path.relpath(p, root)
                                  for p in glob.glob(os.path.join(root, "docs", "*.md")))
    pages = {rel: Page(root, rel) for rel in rels}
    known = repo_paths(root)
    problems = []
    os.makedirs(out)
    with open(os.path.join(out, "pages"), "w") as f:
        f.write("".join(f"{p:02d} {rel}\n" for p, rel in enumerate(rels)))
    readme_links = set()
    for p, rel in enumerate(rels):
        page = pages[rel]
        problems += page.problems
        if not page.lines[0].startswith("# "):
            problems.append(f"{rel}:1: no '# ' title on the first line")
        d = os.path.join(out, f"{p:02d}")
        os.makedirs(d)
        for k, (line, lang, m, body) in enumerate(page.blocks, 1):
            kind = LANGS.get(lang)
            where = f"{rel}:{line}"
            if m is None:
                if kind:
                    problems.append(f"{where}: a ```{lang} block without a readme-test marker")
                continue
            what = m.group(1)
            if what == "run" and kind not in ("sh", "py"):
                problems.append(f"{where}: a ```{lang} block cannot run (mark it file NAME or skip)")
                continue
            name = m.group(2) or ""
            if name and any(part == ".." for part in name.split("/")):
                problems.append(f"{where}: file {name} leaves the page's folder")
                continue
            ext = "run" if what == "run" else "file" if name else "skip"
            with open(os.path.join(d, f"{k:02d}.{ext}"), "w", encoding="utf-8") as f:
                f.write(f"# {where} {kind or lang or 'text'} {name}".rstrip() + "\n" + body)
        for line, target in page.links():
            where = f"{rel}:{line}"
            if SCHEME.match(target):
                continue
            path, _, frag = target.partition("#")
            base = os.path.dirname(rel)
            dest = os.path.normpath(os.path.join(base, path)) if path else rel
            if rel == "README.md":
                readme_links.add(dest)
            if dest == ".." or dest.startswith("../") or os.path.isabs(path):
                problems.append(f"{where}: link to {target}: outside the repository")
                continue
            full = os.path.join(root, dest)
            if not os.path.exists(full) or (known is not None and dest not in known and
                                             dest != "."):
                problems.append(f"{where}: link to {target}: no such file in the repository")
                continue
            if frag and dest.endswith(".md"):
                other = pages.get(dest) or Page(root, dest)
                if frag not in other.anchors:
                    problems.append(f"{where}: link to {target}: {dest} has no heading "
                                    f"#{frag}")
    for rel in rels[1:]:
        if rel not in readme_links:
            problems.append(f"README.md: does not link {rel}")
    n = len(pages["README.md"].lines) - (pages["README.md"].lines[-1] == "")
    if n > README_MAX_LINES:
        problems.append(f"README.md: {n} lines, more than {README_MAX_LINES}: keep it short "
                        "and move the rest into docs/")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
