#!/usr/bin/env python3
# Usage: public-api.py DOC_DIR CRATE [--methods | --dupes] | public-api.py --diff BEFORE.txt AFTER.txt  (DOC_DIR from `cargo doc --no-deps`)
"""List a crate's public items from the rustdoc output that `cargo doc` wrote.

rustdoc writes `<doc>/<crate>/all.html`, the "List of all items": one section per kind
(structs, enums, traits, functions, macros, constants, statics, type aliases, ...) with
one link per item at the path where the crate documents it. This script turns that page
into `kind path` lines, sorted, so two builds can be compared with `--diff` (or `diff`).

Modes:
  public-api.py target/doc carrier             every public item, one `kind path` line each
  public-api.py target/doc carrier --methods   also inherent methods, associated constants,
                                               public fields and trait methods
  public-api.py target/doc carrier --dupes     names defined at more than one public path
  public-api.py target/doc carrier --dupes --against carrier-protocol
                                               names both crates define as distinct items
  public-api.py --diff BEFORE.txt AFTER.txt    `< line` removed, `> line` added, sorted

What it sees is what rustdoc documents: items a feature turns off are absent, and
`#[doc(hidden)]` items are absent although a caller can still name them. Modules are listed
(`mod`) from the module pages. Methods, fields and associated constants only with
`--methods`; trait-impl methods (Clone::clone, ...) and enum variants never. An item rustdoc
inlines at a second path (a re-export of something not otherwise reachable, or a
`#[doc(inline)]` one, or any item of another crate) has a page at each path; `--dupes`
tells those apart from distinct definitions by the source location each page's heading
links to, or, for an item inlined from another crate (no source link under --no-deps),
by its declaration, and names the crate path it comes from when that crate is in DOC_DIR.
A local item re-exported where it is already public is listed once, at its own path.
`--dupes` also reports one item public under several names (`pub use A as B`).
"""

import argparse
import html
import os
import re
import sys
from collections import defaultdict
from html.parser import HTMLParser

# all.html section ids (the <h3 id=...> before each list) to the kind printed.
KINDS = {
    "structs": "struct",
    "enums": "enum",
    "unions": "union",
    "traits": "trait",
    "trait-aliases": "trait-alias",
    "functions": "fn",
    "macros": "macro",
    "attributes": "attr",
    "derives": "derive",
    "constants": "const",
    "statics": "static",
    "types": "type",
    "typedefs": "type",
    "primitives": "primitive",
    "keywords": "keyword",
}


class AllItems(HTMLParser):
    """Collects (kind, path-as-shown, href) from rustdoc's all.html."""

    def __init__(self):
        super().__init__()
        self.section = None
        self.in_list = False
        self.href = None
        self.text = []
        self.items = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h3" and attrs.get("id"):
            self.section = attrs["id"]
        elif tag == "ul" and "all-items" in (attrs.get("class") or ""):
            self.in_list = True
        elif tag == "a" and self.in_list:
            self.href = attrs.get("href")
            self.text = []

    def handle_endtag(self, tag):
        if tag == "ul":
            self.in_list = False
        elif tag == "a" and self.href is not None:
            kind = KINDS.get(self.section, self.section or "?")
            self.items.append((kind, "".join(self.text).strip(), self.href))
            self.href = None

    def handle_data(self, data):
        if self.href is not None:
            self.text.append(data)


def crate_dir(doc, crate):
    return os.path.join(doc, crate.replace("-", "_"))


def read_items(doc, crate):
    """(kind, full path, page file) for each item of `crate`'s all.html."""
    base = crate_dir(doc, crate)
    page = os.path.join(base, "all.html")
    if not os.path.exists(page):
        sys.exit(f"public-api: no {page}; run `cargo doc --no-deps -p {crate}` first")
    parser = AllItems()
    with open(page, encoding="utf-8") as f:
        parser.feed(f.read())
    name = crate.replace("-", "_")
    out = []
    for kind, shown, href in parser.items:
        full = f"{name}::{shown}" if shown else name
        out.append((kind, full, os.path.normpath(os.path.join(base, href))))
    return out


def modules(doc, crate):
    """`mod path` for each module page (`<dir>/index.html` whose heading says Module)."""
    base = crate_dir(doc, crate)
    name = crate.replace("-", "_")
    out = []
    for dirpath, _, files in os.walk(base):
        if dirpath == base or "index.html" not in files:
            continue
        with open(os.path.join(dirpath, "index.html"), encoding="utf-8") as f:
            if "<h1>Module " not in f.read():
                continue
        rel = os.path.relpath(dirpath, base).replace(os.sep, "::")
        out.append(f"mod {name}::{rel}")
    return out


# Sections of an item page: inherent members come between the "implementations" heading and
# the trait impls; a trait's own methods between "required-methods" and "implementors".
H2 = re.compile(r'<h2 id="([^"]+)"')
MEMBER = re.compile(r'id="(tymethod|method|associatedconstant|structfield)\.([A-Za-z0-9_]+)"')
MEMBER_KIND = {"tymethod": "method", "method": "method", "associatedconstant": "assoc-const", "structfield": "field"}


def members(kind, path, page):
    try:
        with open(page, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    heads = [(m.group(1), m.start()) for m in H2.finditer(text)]
    keep = {"implementations", "required-methods", "provided-methods", "required-associated-consts",
            "provided-associated-consts", "fields"}
    spans = []
    for i, (hid, start) in enumerate(heads):
        if hid in keep:
            end = heads[i + 1][1] if i + 1 < len(heads) else len(text)
            spans.append(text[start:end])
    # Struct fields sit before any <h2> with some rustdoc versions: take them from the whole page.
    found = set()
    for m in MEMBER.finditer(text):
        if m.group(1) == "structfield":
            found.add(f"field {path}::{m.group(2)}")
    for span in spans:
        for m in MEMBER.finditer(span):
            found.add(f"{MEMBER_KIND[m.group(1)]} {path}::{m.group(2)}")
    return found


def listing(doc, crate, with_members=False):
    items = read_items(doc, crate)
    lines = {f"{kind} {path}" for kind, path, _ in items} | set(modules(doc, crate))
    if with_members:
        for kind, path, page in items:
            if kind in ("struct", "enum", "union", "trait"):
                lines |= members(kind, path, page)
    return sorted(lines)


# The "Source" link in an item page's heading: `<a class="src" href="../src/carrier/x.rs.html#10-20">`.
HEADING = re.compile(r'class="main-heading">(.*?)</div><pre class="rust item-decl">(.*?)</pre>', re.S)
SRC_LINK = re.compile(r'<a class="src[^"]*" href="([^"]+)"')
TAG = re.compile(r"<[^>]+>")


_HEADINGS = {}


def heading(page):
    """(source link or None, declaration text) of the item on `page`, or None."""
    if page not in _HEADINGS:
        _HEADINGS[page] = _heading(page)
    return _HEADINGS[page]


def same_shape(decl, name, other_decl, other_name):
    """Whether two declarations are one item's, allowing a rename (`pub use X as Y`)."""
    return re.sub(rf"\b{re.escape(name)}\b", "_", decl) == re.sub(
        rf"\b{re.escape(other_name)}\b", "_", other_decl)


def _heading(page):
    try:
        with open(page, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    m = HEADING.search(text)
    if not m:
        return None
    link = SRC_LINK.search(m.group(1))
    src = None
    if link:
        # Resolved from the page's folder, so one file seen from two folders compares equal.
        src = os.path.normpath(os.path.join(os.path.dirname(page), html.unescape(link.group(1))))
    return src, " ".join(html.unescape(TAG.sub("", m.group(2))).split())


def identity(page):
    """Where the item on `page` is defined: its source location, or, for an item inlined from
    another crate (no source link under --no-deps), its declaration."""
    h = heading(page)
    if h is None:
        return None
    return "src:" + h[0] if h[0] else "decl:" + h[1]


TOP_DOC = re.compile(r'<details class="toggle top-doc"[^>]*>.*?<div class="docblock">(.*?)</div></details>', re.S)


def top_doc(page):
    """The item's doc comment as plain text ('' without one)."""
    try:
        with open(page, encoding="utf-8") as f:
            m = TOP_DOC.search(f.read())
    except OSError:
        return ""
    return " ".join(html.unescape(TAG.sub("", m.group(1))).split()) if m else ""


def docs_agree(a, b):
    """Whether two pages can show one item: a re-export's own doc comment goes before the
    item's, so the two texts end alike (both empty, or a common ending of 20+ characters)."""
    if a == b or a.endswith(b) or b.endswith(a):
        return True
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n >= 20


def origin(doc, crate, kind, name, ident, only=None):
    """The path in another crate of `doc` (or in `only`) whose page declares the same item
    (under this name or another), if one does."""
    if not ident or not ident.startswith("decl:"):
        return None
    decl = ident[5:]
    others = [only] if only else sorted(os.listdir(doc))
    found = []
    for other in others:
        other = other.replace("-", "_")
        if other == crate.replace("-", "_") or not os.path.exists(os.path.join(doc, other, "all.html")):
            continue
        for k, path, page in read_items(doc, other):
            h = heading(page) if k == kind else None
            if h and same_shape(decl, name, h[1], path.rsplit("::", 1)[-1]):
                found.append(path)
    # The same name first: `pub use X` before `pub use Y as X` when both would fit.
    found.sort(key=lambda p: (p.rsplit("::", 1)[-1] != name, p))
    return found[0] if found else None


def dupes(doc, crate):
    """Item names that appear at more than one public path, each path with its definition."""
    by_name = defaultdict(list)
    path_page = {}
    for kind, path, page in read_items(doc, crate):
        path_page[path] = page
        by_name[path.rsplit("::", 1)[-1]].append((path, kind, identity(page)))
    src_root = os.path.join(os.path.abspath(doc), "src")
    lines = []
    for name in sorted(by_name):
        entries = sorted(by_name[name])
        if len(entries) < 2:
            continue
        ids = {e[2] for e in entries}
        docs = [top_doc(path_page[e[0]]) for e in entries]
        same_doc = all(docs_agree(d, docs[0]) for d in docs)
        if len(ids) == 1 and None not in ids and same_doc:
            verdict = "one item, shown at each path (a re-export)"
        elif len(ids) == 1 and None not in ids:
            verdict = "one source span, different docs (items a macro generates?)"
        elif len(ids) == len(entries) and None not in ids:
            verdict = f"{len(entries)} distinct definitions"
        else:
            verdict = f"{len(ids)} definitions over {len(entries)} paths"
        lines.append(f"{name}: {verdict}")
        for path, kind, ident in entries:
            where = ""
            if ident and ident.startswith("src:"):
                where = "  (" + os.path.relpath(os.path.abspath(ident[4:]), src_root) + ")"
            elif ident:
                found = origin(doc, crate, kind, name, ident)
                where = f"  (inlined from {found})" if found else "  (inlined from another crate)"
            lines.append(f"    {kind} {path}{where}")
    # One item under several names (`pub use x::A as B` at one path, `A` at another): grouped
    # by where it is defined, or for an item of another crate by the item it comes from.
    by_item = defaultdict(list)
    for kind, path, page in read_items(doc, crate):
        ident = identity(page)
        name = path.rsplit("::", 1)[-1]
        if ident and ident.startswith("decl:"):
            found = origin(doc, crate, kind, name, ident)
            key = ("from", found) if found else None
        elif ident:
            # Items a macro generates share its call's source span: the declaration, with the
            # item's own name blanked, must match too.
            decl = heading(page)[1]
            key = ("src", ident, kind, re.sub(rf"\b{re.escape(name)}\b", "_", decl))
        else:
            key = None
        if key:
            by_item[key].append((path, kind))
    groups = []
    for key in sorted(by_item, key=lambda k: str(k)):
        if key[0] == "from":
            groups.append((key, sorted(by_item[key])))
            continue
        # Unit structs that one macro call generates have one span and one shape: their doc
        # comments tell them apart. A re-export's own doc comment goes before the item's.
        clusters = []
        for path, kind in sorted(by_item[key]):
            doc_text = top_doc(path_page[path])
            for c in clusters:
                if docs_agree(doc_text, c[0]):
                    c[1].append((path, kind))
                    break
            else:
                clusters.append((doc_text, [(path, kind)]))
        groups += [(key, c[1]) for c in clusters]
    for key, entries in groups:
        if len({p.rsplit("::", 1)[-1] for p, _ in entries}) < 2:
            continue
        what = f"inlined from {key[1]}" if key[0] == "from" else "one definition"
        names = ", ".join(sorted({p.rsplit("::", 1)[-1] for p, _ in entries}))
        lines.append(f"{names}: one item under {len(entries)} paths with different names ({what})")
        for path, kind in entries:
            lines.append(f"    {kind} {path}")
    return lines


def clashes(doc, crate, other):
    """Names that `crate` and `other` both define as distinct items; an item of `crate` that
    is `other`'s own item inlined (renamed or not) is not a clash."""
    theirs = defaultdict(list)
    for kind, path, _ in read_items(doc, other):
        theirs[path.rsplit("::", 1)[-1]].append(f"{kind} {path}")
    lines = []
    for kind, path, page in sorted(read_items(doc, crate), key=lambda e: e[1]):
        name = path.rsplit("::", 1)[-1]
        if name not in theirs:
            continue
        ident = identity(page)
        if origin(doc, crate, kind, name, ident, only=other):
            continue
        lines.append(f"{name}: {kind} {path}  vs  " + ", ".join(sorted(theirs[name])))
    return lines


def diff(before, after):
    with open(before, encoding="utf-8") as f:
        old = {line.rstrip("\n") for line in f if line.strip()}
    with open(after, encoding="utf-8") as f:
        new = {line.rstrip("\n") for line in f if line.strip()}
    # Sorted by the line itself, so a removed and an added item of the same name sit together.
    return [f"< {x}" for x in sorted(old - new)] + [f"> {x}" for x in sorted(new - old)]


def main():
    p = argparse.ArgumentParser(
        description="List a crate's public items from rustdoc's all.html (cargo doc --no-deps), "
        "report names defined at several paths, or diff two listings.",
        epilog="example: python3 scripts/public-api.py target/doc carrier > after.txt",
    )
    p.add_argument("doc", nargs="?", help="rustdoc output folder, e.g. target/doc")
    p.add_argument("crate", nargs="?", help="crate (package) name, e.g. carrier or carrier-protocol")
    p.add_argument("--methods", action="store_true", help="also list inherent methods, associated constants, public fields and trait methods")
    p.add_argument("--dupes", action="store_true", help="report item names found at more than one public path")
    p.add_argument("--against", metavar="OTHER", help="with --dupes: names CRATE and crate OTHER (in the same DOC) both define")
    p.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two saved listings")
    a = p.parse_args()
    if a.diff:
        lines = diff(*a.diff)
    elif a.doc and a.crate:
        if a.dupes and a.against:
            lines = clashes(a.doc, a.crate, a.against)
        elif a.dupes:
            lines = dupes(a.doc, a.crate)
        else:
            lines = listing(a.doc, a.crate, a.methods)
    else:
        p.error("give DOC CRATE, or --diff BEFORE AFTER")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
