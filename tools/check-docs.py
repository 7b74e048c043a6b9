#!/usr/bin/env python3
"""Lists the public declarations of Swift sources that have no doc comment, and what keeps the
Markdown documentation from being true to the tree.

A declaration is public when it is declared `public` or `open`, or when it is a member of a
`public extension` or a requirement of a public protocol without an access modifier of its
own; members of a type that is not public, and anything inside a function or closure body,
are not. A declaration is documented when a `///` line or the end of a `/** */` block sits
directly above it (lines starting with `@`, its attributes, may come in between).

Not checked: extension lines themselves, enum `case` lines, and the protocol requirements
listed in EXEMPT_* below, whose meaning the protocol documents.

Prints `path:line: public declaration without a doc comment: <line>` for each finding and
exits 1 if there are any; prints nothing and exits 0 if there are none.

The documentation checks (README.md and docs/*.md under --root, the repository by default):
README.md is at most README_MAX_LINES lines (it is the front door; the rest lives in docs/),
and every relative link, outside code, names a file that exists and, for a `#anchor` into a
Markdown file, a heading of that file (GitHub's anchors: lower-cased, punctuation but `-` and
`_` dropped, spaces as `-`). Each finding prints as `path:line: …`.
"""

import argparse
import os
import re
import sys

EXEMPT_PROPERTIES = {"description", "debugDescription", "errorDescription", "testDescription", "rawValue"}
EXEMPT_FUNCTIONS = {"hash(into:)", "encode(to:)", "makeIterator()", "next()", "==", "<"}
EXEMPT_INITIALISERS = {
    "init(from:)", "init(rawValue:)", "init(stringLiteral:)", "init(integerLiteral:)",
    "init(floatLiteral:)", "init(booleanLiteral:)", "init(nilLiteral:)", "init(arrayLiteral:)",
    "init(dictionaryLiteral:)", "init(unicodeScalarLiteral:)", "init(extendedGraphemeClusterLiteral:)",
}

ACCESS = r"(?:public|open|package|internal|fileprivate|private)(?:\(set\))?"
MODIFIER = (r"(?:" + ACCESS + r"|static|class|final|override|mutating|nonmutating|nonisolated|"
            r"convenience|required|lazy|dynamic|indirect|weak|unowned|optional|isolated|distributed|"
            r"prefix|postfix|infix|consuming|borrowing)")
DECLARATION = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*"
    r"(?P<modifiers>(?:" + MODIFIER + r"\s+)*)"
    r"(?P<keyword>func|init|subscript|var|let|struct|enum|class|actor|protocol|typealias|"
    r"associatedtype|extension|case|deinit)(?![\w])")
TYPE_KEYWORDS = {"struct", "enum", "class", "actor", "protocol", "extension"}
NOT_CHECKED = {"extension", "case", "deinit"}


def strip_code(line, stack):
    """Returns the code of `line` with comments removed and string literals emptied.

    `stack` carries what the line starts inside (block comments, multi-line strings, string
    interpolations) from one line to the next, and is updated in place.
    """
    out = []
    i, n = 0, len(line)
    while i < n:
        top = stack[-1]
        if top[0] == "comment":
            if line.startswith("/*", i):
                stack.append(["comment"])
                i += 2
            elif line.startswith("*/", i):
                stack.pop()
                i += 2
            else:
                i += 1
            continue
        if top[0] == "string":
            _, hashes, multiline = top
            escape = "\\" + "#" * hashes
            if line.startswith(escape, i):
                i += len(escape)
                if i < n and line[i] == "(":
                    stack.append(["interpolation", 0])
                i += 1
                continue
            close = ('"""' if multiline else '"') + "#" * hashes
            if line.startswith(close, i):
                stack.pop()
                if stack[-1][0] == "code":
                    out.append('""')
                i += len(close)
                continue
            i += 1
            continue
        # Code, at the top level or inside a string interpolation.
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            stack.append(["comment"])
            i += 2
            continue
        literal = re.match(r'(#*)("""|")', line[i:])
        if literal:
            stack.append(["string", len(literal.group(1)), literal.group(2) == '"""'])
            i += literal.end()
            continue
        c = line[i]
        if top[0] == "interpolation":
            if c == "(":
                top[1] += 1
            elif c == ")":
                if top[1] == 0:
                    stack.pop()
                else:
                    top[1] -= 1
        else:
            out.append(c)
        i += 1
    # A single-line string never continues on the next line.
    while stack[-1][0] in ("string", "interpolation") and not any(
            frame[0] == "string" and frame[2] for frame in stack):
        stack.pop()
    return "".join(out)


def selector(name, rest):
    """`name(label:label:)` from the text after a function's or initialiser's name."""
    if rest.startswith("<"):
        depth = 0
        for index, c in enumerate(rest):
            depth += {"<": 1, ">": -1}.get(c, 0)
            if depth == 0:
                rest = rest[index + 1:]
                break
    rest = rest.lstrip()
    if not rest.startswith("("):
        return name
    params, depth, current = [], 0, ""
    for c in rest[1:]:
        if c in "([<":
            depth += 1
        elif c in ")]>":
            if depth == 0:
                break
            depth -= 1
        if c == "," and depth == 0:
            params.append(current)
            current = ""
        else:
            current += c
    params.append(current)
    labels = [p.split(":")[0].split()[0] for p in params if p.split(":")[0].strip()]
    return name + "(" + "".join(label + ":" for label in labels) + ")"


def is_exempt(match, header_of_enclosing):
    """Whether the declaration `match` found implements one of the exempt requirements."""
    keyword, after = match.group("keyword"), match.string[match.end("keyword"):]
    if keyword in ("var", "let"):
        name = re.match(r"\s*(\w+)", after)
        name = name.group(1) if name else ""
        if name == "id":
            return re.search(r"\bIdentifiable\b", header_of_enclosing) is not None
        return name in EXEMPT_PROPERTIES
    if keyword == "func":
        name = re.match(r"\s*([A-Za-z_]\w*|[^\sA-Za-z_(]+)\s*", after)
        if not name:
            return False
        if name.group(1) in EXEMPT_FUNCTIONS:
            return True
        return selector(name.group(1), after[name.end():]) in EXEMPT_FUNCTIONS
    if keyword == "init":
        after = after.lstrip("?!")
        return selector("init", after) in EXEMPT_INITIALISERS
    return False


def has_doc_comment(lines, index):
    j = index - 1
    while j >= 0 and lines[j].strip().startswith("@"):
        j -= 1
    if j < 0:
        return False
    above = lines[j].strip()
    if above.startswith("///"):
        return True
    if above.endswith("*/"):
        while j >= 0 and "/*" not in lines[j]:
            j -= 1
        return j >= 0 and lines[j][lines[j].index("/*"):].startswith("/**")
    return False


def check_file(path):
    with open(path, encoding="utf-8") as file:
        lines = file.read().split("\n")
    findings = []
    stack = [["code"]]
    # Each open brace: (kind, public, header) where kind is "type", "extension", "protocol"
    # or "body" (a function, accessor, closure or statement body).
    braces = []
    pending = None
    for index, line in enumerate(lines):
        starts_in_literal = stack[-1][0] != "code"
        code = strip_code(line, stack)
        match = None if starts_in_literal else DECLARATION.match(code)
        if match:
            keyword = match.group("keyword")
            modifiers = match.group("modifiers").split()
            explicit = [m for m in modifiers if re.fullmatch(ACCESS, m) and not m.endswith("(set)")]
            inside_body = any(kind == "body" for kind, _, _ in braces)
            enclosing_public = all(public for kind, public, _ in braces if kind in ("type", "protocol"))
            innermost = braces[-1] if braces else ("file", False, "")
            if explicit:
                declared_public = explicit[0] in ("public", "open")
            else:
                declared_public = innermost[0] in ("extension", "protocol") and innermost[1]
            public = declared_public and enclosing_public and not inside_body
            if public and keyword not in NOT_CHECKED and not has_doc_comment(lines, index) \
                    and not is_exempt(match, innermost[2]):
                findings.append((path, index + 1, line.strip()))
            if keyword in TYPE_KEYWORDS:
                kind = keyword if keyword in ("extension", "protocol") else "type"
                if kind == "extension":
                    public = bool(explicit) and explicit[0] in ("public", "open")
                pending = (kind, public, code)
            else:
                pending = None
        for c in code:
            if c == "{":
                braces.append(pending or ("body", False, ""))
                pending = None
            elif c == "}" and braces:
                braces.pop()
    return findings


def swift_files(paths):
    for path in paths:
        if os.path.isfile(path):
            yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".swift"):
                    yield os.path.join(root, name)


def default_directories():
    sources = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "Sources")
    directories = []
    for name in sorted(os.listdir(sources)):
        directory = os.path.join(sources, name)
        if name != "eventlog" and os.path.isdir(directory) and any(swift_files([directory])):
            directories.append(os.path.relpath(directory))
    return directories


README_MAX_LINES = 300
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def markdown_lines(path):
    """The lines of a Markdown file with fenced code blocks blanked and inline code emptied."""
    with open(path, encoding="utf-8") as file:
        lines = file.read().split("\n")
    out, fence = [], None
    for line in lines:
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
            out.append("")
        elif fence is not None:
            if stripped.startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(re.sub(r"(`+)(?:(?!\1).)+\1", "``", line))
    return out


def raw_headings(path):
    """Heading texts with their inline code kept, for anchors (markdown_lines empties code)."""
    with open(path, encoding="utf-8") as file:
        lines = file.read().split("\n")
    fence, texts = None, []
    for line in lines:
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
        elif fence is not None:
            if stripped.startswith(fence):
                fence = None
        else:
            heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if heading:
                texts.append(heading.group(1))
    return texts


def heading_anchors(path):
    """The anchors GitHub makes for the headings of the Markdown file at `path`."""
    seen, result = {}, set()
    for text in raw_headings(path):
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def check_markdown(root):
    """Findings `(path, line, message)` for README.md and docs/*.md under `root`."""
    findings = []
    readme = os.path.join(root, "README.md")
    documents = [readme] if os.path.isfile(readme) else []
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        documents += [os.path.join(docs, name) for name in sorted(os.listdir(docs)) if name.endswith(".md")]
    if os.path.isfile(readme):
        with open(readme, encoding="utf-8") as file:
            count = len(file.read().rstrip("\n").split("\n"))
        if count > README_MAX_LINES:
            findings.append((readme, count, f"README.md has {count} lines, more than {README_MAX_LINES}: "
                                            "move reference material into docs/"))
    for document in documents:
        for number, line in enumerate(markdown_lines(document), start=1):
            for match in LINK.finditer(line):
                target = match.group(1)
                if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
                    continue  # http:, https:, mailto: …: not a file of the tree
                path_part, _, anchor = target.partition("#")
                linked = os.path.normpath(os.path.join(os.path.dirname(document), path_part)) if path_part else document
                if not os.path.exists(linked):
                    findings.append((document, number, f"link to a file that does not exist: {target}"))
                elif anchor and linked.endswith(".md") and anchor not in heading_anchors(linked):
                    findings.append((document, number, f"link to an anchor that no heading of {os.path.relpath(linked)} makes: {target}"))
    return findings


def main():
    parser = argparse.ArgumentParser(
        description="List public Swift declarations that have no /// doc comment directly above them.",
        epilog="Exits 1 when it lists any, 0 (printing nothing) when there are none.")
    parser.add_argument("--root", metavar="DIR", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir),
                        help="where README.md and docs/ are (default: the repository holding this script)")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="source directories or .swift files (default: every Sources/* directory "
                             "holding .swift files, except Sources/eventlog, the executable's main)")
    arguments = parser.parse_args()
    paths = arguments.paths or default_directories()
    for path in paths:
        if not os.path.exists(path):
            parser.error(f"no such file or directory: {path}")
    findings = [finding for file in swift_files(paths) for finding in check_file(file)]
    for path, line, text in findings:
        print(f"{path}:{line}: public declaration without a doc comment: {text}")
    documentation = check_markdown(arguments.root)
    for path, line, message in documentation:
        print(f"{os.path.relpath(path)}:{line}: {message}")
    return 1 if findings or documentation else 0


if __name__ == "__main__":
    sys.exit(main())
