#!/usr/bin/env bash
# Tidy rules for Sources/ and Tests/, checked before any build (`make test` runs this first).
# Each finding is printed as file:line: rule: message; the script exits 1 when there is any.
#   width       lines are at most 140 characters (the generated EmbeddedWebFiles.swift is skipped)
#   function    no function, initialiser or closure-bodied accessor spans more than 100 lines
#   c-import    `import CLibPQ|COpenSSL|CCurl|CMicroHTTPD` only in its wrapper (Postgres, Crypto,
#               HTTPClient, HTTPServer), and there as `internal import`
#   date        no `Date()` in Sources/ outside Sources/Time/Clock.swift (inject a Clock)
#   json        no `JSONSerialization` or `[String: Any]` in Sources/ (Codable only)
# scripts/tidy-allow.txt lists known exceptions as `path:rule`, one a line; it is meant to shrink to empty.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import os, re, sys

WIDTH = 140
FUNCTION_LINES = 100
SKIP = {"Sources/TenderServer/Web/EmbeddedWebFiles.swift"}
CLOCK_FILE = "Sources/Time/Clock.swift"
WRAPPERS = {"CLibPQ": "Sources/Postgres/", "COpenSSL": "Sources/Crypto/",
            "CCurl": "Sources/HTTPClient/", "CMicroHTTPD": "Sources/HTTPServer/"}

allowed = set()
if os.path.exists("scripts/tidy-allow.txt"):
    for raw in open("scripts/tidy-allow.txt", encoding="utf-8"):
        entry = raw.split("#", 1)[0].strip()
        if entry:
            allowed.add(entry)
used = set()
findings = []

def report(path, line, rule, message):
    key = f"{path}:{rule}"
    if key in allowed:
        used.add(key)
        return
    findings.append(f"{path}:{line}: {rule}: {message}")

def code_only(lines):
    """Each line with string literals and comments blanked, so braces and names inside them are not counted."""
    out = []
    in_block = 0
    in_multi = False
    for text in lines:
        result = []
        i = 0
        while i < len(text):
            if in_multi:
                end = text.find('"""', i)
                if end < 0:
                    i = len(text)
                else:
                    in_multi = False
                    i = end + 3
                continue
            if in_block:
                if text.startswith("*/", i):
                    in_block -= 1
                    i += 2
                elif text.startswith("/*", i):
                    in_block += 1
                    i += 2
                else:
                    i += 1
                continue
            if text.startswith("//", i):
                break
            if text.startswith("/*", i):
                in_block = 1
                i += 2
                continue
            if text.startswith('"""', i):
                in_multi = True
                i += 3
                continue
            ch = text[i]
            if ch == '"':
                # A one-line string; interpolations may nest parentheses but not quotes we care about.
                i += 1
                depth = 0
                while i < len(text):
                    if text[i] == "\\" and i + 1 < len(text) and text[i + 1] == "(":
                        depth += 1
                        i += 2
                        continue
                    if text[i] == "\\":
                        i += 2
                        continue
                    if depth and text[i] == ")":
                        depth -= 1
                    elif not depth and text[i] == '"':
                        break
                    i += 1
                i += 1
                result.append('""')
                continue
            result.append(ch)
            i += 1
        out.append("".join(result))
    return out

DECL = re.compile(r"(^|\s)(func\s+[^\s(<]+|init[?!]?\s*[(<]|deinit\b|(get|set)\s*\{)")

def check_functions(path, lines):
    code = code_only(lines)
    index = 0
    while index < len(code):
        match = DECL.search(code[index])
        if not match:
            index += 1
            continue
        # Find the body's opening brace (the signature may span lines); a protocol requirement has none.
        start = index
        column = match.end() - (1 if code[index][match.end() - 1:match.end()] == "{" else 0)
        line, col = start, column
        depth = 0
        opened = None
        while line < len(code) and opened is None:
            segment = code[line][col:]
            for offset, ch in enumerate(segment):
                if ch == "(" or ch == "[":
                    depth += 1
                elif ch == ")" or ch == "]":
                    depth -= 1
                elif ch == "{" and depth <= 0:
                    opened = (line, col + offset)
                    break
                elif ch == "}" and depth <= 0:
                    line = len(code)
                    break
            if opened is None:
                if line - start > 20:
                    break
                line, col = line + 1, 0
        if opened is None:
            index += 1
            continue
        braces = 0
        line, col = opened
        end = None
        while line < len(code) and end is None:
            for ch in code[line][col:]:
                if ch == "{":
                    braces += 1
                elif ch == "}":
                    braces -= 1
                    if braces == 0:
                        end = line
                        break
            line, col = line + 1, 0
        if end is None:
            index += 1
            continue
        length = end - start + 1
        if length > FUNCTION_LINES:
            name = match.group(2).strip().rstrip("({<")
            report(path, start + 1, "function", f"{name} spans {length} lines (at most {FUNCTION_LINES})")
        index += 1

C_IMPORT = re.compile(r"^\s*(?:@\w+\s+)*(?:(public|package|internal|private|fileprivate)\s+)?import\s+(?:\w+\s+)?(CLibPQ|COpenSSL|CCurl|CMicroHTTPD)\b")

def check_file(path):
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    in_sources = path.startswith("Sources/")
    code = code_only(lines)
    for number, text in enumerate(lines, 1):
        if len(text) > WIDTH:
            report(path, number, "width", f"{len(text)} characters (at most {WIDTH})")
        match = C_IMPORT.match(text)
        if match:
            module = match.group(2)
            if not path.startswith(WRAPPERS[module]):
                report(path, number, "c-import", f"{module} is imported only by {WRAPPERS[module].rstrip('/')}")
            elif match.group(1) != "internal":
                report(path, number, "c-import", f"write `internal import {module}`")
        if in_sources:
            stripped = code[number - 1]
            if path != CLOCK_FILE and re.search(r"(?<![\w.])Date\(\)", stripped):
                report(path, number, "date", "Date() outside the clock: take `now` or use the injected Clock")
            if "JSONSerialization" in stripped or re.search(r"\[String\s*:\s*Any\]", stripped):
                report(path, number, "json", "untyped JSON: use Codable types")
    check_functions(path, lines)

for root in ("Sources", "Tests"):
    for directory, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(".swift") and path not in SKIP:
                check_file(path)

for entry in sorted(allowed - used):
    findings.append(f"scripts/tidy-allow.txt:1: stale: {entry} no longer needs an exception; remove it")

if findings:
    print("\n".join(sorted(findings)), file=sys.stderr)
    print(f"tidy: {len(findings)} finding(s)", file=sys.stderr)
    sys.exit(1)
print("tidy: ok")
PY
