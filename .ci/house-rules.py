#!/usr/bin/env python3
"""The house rules, kept by a machine (`make test` runs this; see Docs/Architecture.md).

  house-rules.py sources             no Sources/ file over 400 lines (unless listed with a reason
                                     in .ci/house-exceptions); no `default:` in a switch over one
                                     of our own enums (Sources/, Tests/, Examples/, Benchmarks/)
  house-rules.py warnings DIR...     no compiler warning in our own code, read from the
                                     diagnostics files (*.dia) the compiler keeps per source file
                                     in each build directory DIR (e.g. .build/debug): an
                                     incremental build prints nothing for a file it did not
                                     compile again, but that file's .dia still holds its warnings

Exit status 1 with one line per finding (file:line: rule: what), 0 when all rules hold.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 400
EXCEPTIONS = os.path.join(ROOT, ".ci", "house-exceptions")
OWN_CODE = ["Sources", "Tests", "Examples", "Benchmarks"]
SKIP_DIRS = {".build", ".build-fuzz", ".build-bench", ".build-torture", "checkouts"}


def swift_files(top):
    for base, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".swift"):
                yield os.path.join(base, name)


def rel(path):
    return os.path.relpath(path, ROOT)


def blank_out(text):
    """The text with comments and string literals replaced by spaces (newlines kept), so
    braces, keywords and colons are only the code's."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "#" and re.match(r'#+"', text[i:])):
            hashes = len(re.match(r"#*", text[i:]).group(0))
            start = i + hashes
            multi = text.startswith('"""', start)
            close = ('"""' if multi else '"') + "#" * hashes
            j = start + (3 if multi else 1)
            while j < n:
                if hashes == 0 and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(close, j):
                    j += len(close)
                    break
                if not multi and text[j] == "\n":
                    break
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code, open_index):
    depth = 0
    for j in range(open_index, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def top_level_labels(code, open_index, close_index):
    """The `case …:` and `default:` labels directly in the block (not in nested braces), as
    (keyword, pattern text, offset)."""
    labels, depth, j = [], 0, open_index + 1
    while j < close_index:
        c = code[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 and (code[j - 1].isspace() or code[j - 1] in ";{"):
            m = re.match(r"(case|default)\b", code[j:])
            if m:
                k, parens = j + len(m.group(1)), 0
                while k < close_index:
                    if code[k] in "([":
                        parens += 1
                    elif code[k] in ")]":
                        parens -= 1
                    elif code[k] == ":" and parens == 0:
                        break
                    k += 1
                labels.append((m.group(1), code[j + len(m.group(1)):k], j))
                j = k
        j += 1
    return labels


def our_enums(excluded_dirs):
    """Every enum declared in Sources/ (outside `excluded_dirs`): (name, its case names)."""
    enums = []
    for path in swift_files("Sources"):
        if any(rel(path).startswith(d) for d in excluded_dirs):
            continue
        code = blank_out(open(path, encoding="utf-8").read())
        for m in re.finditer(r"\benum\s+(\w+)[^{]*\{", code):
            close = matching_brace(code, m.end() - 1)
            names = set()
            body, depth, flat = code[m.end():close], 0, []
            for c in body:  # only the enum's own level: nested types' cases are theirs
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                elif depth == 0:
                    flat.append(c)
            for decl in re.finditer(r"(?:^|\s)(?:indirect\s+)?case\s+([^\n]*)", "".join(flat)):
                text = re.sub(r"\([^()]*(?:\([^()]*\)[^()]*)*\)", "", decl.group(1))
                for part in text.split(","):
                    name = re.match(r"\s*`?(\w+)", part)
                    if name:
                        names.add(name.group(1))
            enums.append((m.group(1), names))
    return enums


def check_sources():
    problems = []
    exceptions, value_enum_dirs = {}, []
    if os.path.exists(EXCEPTIONS):
        for line in open(EXCEPTIONS, encoding="utf-8"):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            path, _, reason = line.partition(" ")
            if path == "value-enums":
                path, _, reason = reason.strip().partition(" ")
                value_enum_dirs.append(path)
            else:
                exceptions[path] = reason.strip()
            if not reason.strip():
                problems.append(f".ci/house-exceptions: {path}: an exception needs a reason after the path")
    for path in swift_files("Sources"):
        count = sum(1 for _ in open(path, encoding="utf-8"))
        if count > MAX_LINES and rel(path) not in exceptions:
            problems.append(f"{rel(path)}:{count}: file-length: {count} lines, over {MAX_LINES}; split it by concern "
                            f"(or list it with a reason in .ci/house-exceptions)")
    enums = our_enums(value_enum_dirs)
    for top in OWN_CODE:
        for path in swift_files(top):
            code = blank_out(open(path, encoding="utf-8").read())
            for m in re.finditer(r"\bswitch\b", code):
                brace = code.find("{", m.end())
                if brace < 0:
                    continue
                labels = top_level_labels(code, brace, matching_brace(code, brace))
                defaults = [offset for keyword, _, offset in labels
                            if keyword == "default" and not code[max(0, offset - 9):offset].strip().endswith("@unknown")]
                if not defaults:
                    continue
                patterns = [pattern for keyword, pattern, _ in labels if keyword == "case"]
                # A cast (`let e as T`, `is T`, `T.case` on an `any Error`): the subject is not one enum.
                if any(re.search(r"\bas\b|\bis\b|\b[A-Z]\w*\.\w", p) for p in patterns):
                    continue
                dotted = set()
                for pattern in patterns:
                    dotted.update(re.findall(r"(?<![\w)\].?!])\.\s*(\w+)", pattern))
                # Over one of our enums: every case the switch names is a case of that enum.
                owners = sorted({name for name, cases in enums if dotted and dotted <= cases})
                if owners:
                    line = code.count("\n", 0, defaults[0]) + 1
                    problems.append(f"{rel(path)}:{line}: default-over-own-enum: a `default:` in a switch over "
                                    f"{' or '.join(owners)} (it names {', '.join(sorted(dotted))}); list the other cases "
                                    f"instead, so that a new case does not compile until it is handled here")
    return problems


class Bits:
    """A reader of LLVM's bitstream (the container of clang's and swiftc's .dia files)."""

    def __init__(self, data):
        self.value, self.size, self.pos = int.from_bytes(data, "little"), len(data) * 8, 0

    def fixed(self, width):
        if self.pos + width > self.size:
            raise EOFError
        out = (self.value >> self.pos) & ((1 << width) - 1)
        self.pos += width
        return out

    def vbr(self, width):
        out, shift, high = 0, 0, 1 << (width - 1)
        while True:
            piece = self.fixed(width)
            out |= (piece & (high - 1)) << shift
            shift += width - 1
            if not piece & high:
                return out

    def align32(self):
        self.pos = (self.pos + 31) // 32 * 32


def diagnostics(data):
    """The diagnostics in a serialized-diagnostics file: (severity, file name, line, message).
    Severities: 1 note, 2 warning, 3 error, 4 fatal, 5 remark."""
    if data[:4] != b"DIAG":
        return []
    bits = Bits(data[4:])
    files, found = {}, []
    blockinfo = {}  # block id -> abbreviations its BLOCKINFO defines

    def read_abbrev():
        ops = []
        for _ in range(bits.vbr(5)):
            if bits.fixed(1):
                ops.append(("literal", bits.vbr(8)))
            else:
                encoding = bits.fixed(3)
                ops.append((encoding, bits.vbr(5) if encoding in (1, 2) else None))
        return ops

    def read_value(op):
        kind, width = op
        if kind == "literal":
            return width
        if kind == 1:
            return bits.fixed(width)
        if kind == 2:
            return bits.vbr(width)
        if kind == 4:
            return bits.fixed(6)
        raise ValueError("unexpected operand encoding")

    def read_record(ops):
        values, i = [], 0
        while i < len(ops):
            kind = ops[i][0]
            if kind == 3:  # array of the next operand
                values.append([read_value(ops[i + 1]) for _ in range(bits.vbr(6))])
                i += 2
                continue
            if kind == 5:  # blob
                length = bits.vbr(6)
                bits.align32()
                start = bits.pos // 8
                values.append(data[4 + start:4 + start + length])
                bits.pos += length * 8
                bits.align32()
            else:
                values.append(read_value(ops[i]))
            i += 1
        return values

    def block(block_id, width):
        abbrevs = list(blockinfo.get(block_id, []))
        current = None  # the block a BLOCKINFO record sets abbreviations for
        while True:
            code = bits.fixed(width)
            if code == 0:  # end of block
                bits.align32()
                return
            if code == 1:  # a sub-block
                inner, inner_width = bits.vbr(8), bits.vbr(4)
                bits.align32()
                bits.fixed(32)
                block(inner, inner_width)
            elif code == 2:  # an abbreviation
                abbrev = read_abbrev()
                if block_id == 0:
                    blockinfo.setdefault(current, []).append(abbrev)
                else:
                    abbrevs.append(abbrev)
            else:
                if code == 3:
                    values = [bits.vbr(6)]
                    values += [bits.vbr(6) for _ in range(bits.vbr(6))]
                else:
                    values = read_record(abbrevs[code - 4])
                record = values[0]
                if block_id == 0 and record == 1:
                    current = values[1]
                # [6, file id, size, time, name length, name]
                elif block_id == 9 and record == 6 and isinstance(values[-1], bytes):
                    files[values[1]] = values[-1].decode("utf-8", "replace")
                # [2, severity, file id, line, column, offset, category, flag, length, message]
                elif block_id == 9 and record == 2 and len(values) >= 10:
                    message = values[-1]
                    message = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
                    found.append((values[1], values[2], values[3], message))

    try:
        block(None, 2)
    except (EOFError, IndexError, ValueError):
        pass
    return [(severity, files.get(file_id, "?"), line, message) for severity, file_id, line, message in found]


def check_warnings(build_dirs):
    """A .dia holds the diagnostics of its source file's last compile (it is rewritten each
    time the file is compiled), so together they are the warnings of the whole build however
    little of it the last build compiled."""
    problems = []
    own = set()
    for top in OWN_CODE:
        for path in swift_files(top):
            own.add(os.path.realpath(path))
    for build_dir in build_dirs:
        if not os.path.isdir(build_dir):
            problems.append(f"{build_dir}: warnings: no such build directory (build first)")
            continue
        for base, dirs, files in os.walk(build_dir):
            dirs[:] = [d for d in dirs if d not in ("checkouts", "repositories", "artifacts")]
            for name in files:
                if not name.endswith(".dia"):
                    continue
                for severity, path, line, message in diagnostics(open(os.path.join(base, name), "rb").read()):
                    # Ours, and still a source file (a deleted file's .dia stays behind).
                    if severity == 2 and os.path.realpath(path) in own:
                        problems.append(f"{rel(path)}:{line}: warning: {message}")
    return sorted(set(problems))


def main(argv):
    if len(argv) >= 1 and argv[0] == "sources":
        problems = check_sources()
    elif len(argv) >= 2 and argv[0] == "warnings":
        problems = check_warnings(argv[1:])
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"house rules: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"house rules ({argv[0]}): all hold")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
