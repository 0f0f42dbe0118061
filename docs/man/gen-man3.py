#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen-man3.py: one man page per exported function, from the public headers.

    gen-man3.py --out DIR HEADER...    write DIR/FUNCTION.3 for each function
    gen-man3.py --list HEADER...       print the function names, one a line
    gen-man3.py --check HEADER...      fail (exit 1) when a function's comment
                                       lacks what its page needs

Every function a header declares WEFT_API gets a page: NAME, LIBRARY,
SYNOPSIS (the #include line and the prototype as the header has it),
DESCRIPTION, RETURN VALUE, ERRORS, THREADS and SEE ALSO. Everything but the
prototype comes from the comments, so a page cannot say other than its
header; the meaning of each error code comes from WEFT_ERRNO_MAP in
<weft/core.h>, the one list weft_strerror() reads too.

How the comments are read (docs/ARCHITECTURE.md, "Header comments and the
function man pages"):

- A declaration's comment is the one that ends on the line just above it.
  Declarations that follow one another with no comment between share the
  comment of the first (a group: "weft_log_set_level ... " above
  weft_log_set_level and weft_log_get_level).
- A paragraph of the header (lines with no blank line between) that starts
  with a comment that does not begin with a function's name heads a group:
  when a declaration's own comment leaves the threads out, the paragraph's
  first comment gives them, and its sentences join the description ("What
  a handler reads from its message ... The handler's thread." above every
  weft_msvc_msg_* accessor, some with a comment of their own).
- Within a shared comment, a sentence that begins with a function's name
  is about that function, and so are those after it up to the next such;
  the return value and errors of a page come from its function's
  sentences ("weft_log_set_format ... Returns 0 or WEFT_ENOTSUP.
  weft_log_get_format returns the format in use.").
- Below a "---- Title ----" divider, a comment that stands alone (a blank
  line after it) introduces what follows, up to the next divider; the
  pages of the functions it introduces show it in their DESCRIPTION.
- A sentence "Threads: ..." that begins a comment or a paragraph of one is
  the threads statement of every declaration after it in that header
  whose comment has none (up to the next such sentence), for a header
  whose functions all follow one rule (<weft/mp.h>, <weft/sim.h>).
- A comment that begins "NAME is OTHER ..." (NAME is weft_OTHER for text
  in memory, with a buffer, ...) says NAME behaves as the function OTHER;
  what NAME's comment leaves out (return value, errors, threads) is
  OTHER's, and the page says so.

What --check requires of each function, its own comment and group comment
together (or what it takes from OTHER as above):

- a threads statement: a sentence saying which thread may call it ("Any
  thread.", "Any other thread.", "Loop thread.", "The loop's thread",
  "Before weft_msvc_start only.", "Not from one of the service's loops",
  "thread-safe", ...; THREAD_PATTERNS below lists what is understood);
- unless it returns void, a return-value sentence: one with "returns" in
  it, or one that begins with the function's name and "is" ("weft_msvc_
  port is the bound listening port once started, else 0.");
- when it returns int, the error codes it may return, named (WEFT_EINVAL,
  ...), or the words "never fails" or "errors of weft_OTHER" (or
  "weft_OTHER's errors", whose codes the page then lists), or, for an int
  that is no error code, "not an error code".
"""
import argparse
import os
import re
import sys

THREAD_PATTERNS = [
    r"\bany (other )?thread\b",
    r"\bany thread that\b",
    r"\bloop(?:'s)? thread\b",
    r"\bthread of (its|the) loop\b",
    r"\bnot from\b",
    r"\bnot on (one of )?(the|its)\b",
    r"\bbefore (weft_\w+|any loop runs|the loop runs|it starts)",
    r"\bthread-safe\b",
    r"\bhandler's thread\b",
    r"\bcallback's thread\b",
    r"\bsingle-threaded\b",
    r"\bsimulator's thread\b",
]
THREAD_RE = re.compile("|".join(THREAD_PATTERNS), re.I)
ERR_RE = re.compile(r"\bWEFT_E[A-Z]+\b")
NO_ERR_RE = re.compile(
    r"never fails|not an error code|errors of weft_\w+|weft_\w+'s errors|"
    r"another WEFT_E code|a WEFT_E code", re.I)
FUNC_RE = re.compile(r"\bweft_[a-z0-9_]+\b")
DIVIDER_RE = re.compile(r"^/\*\s*-{3,}")

# The section page of a header, as tests/repo/check-man.sh has it.
SECTION_PAGE = {
    "core": "weft_core",
    "channel": "weft_channel",
    "messaging": "weft_msvc",
    "msgpack_codec": "weft_msgpack",
}


class Decl:
    def __init__(self, header, name, ret, proto, own, head, intro, default):
        self.header = header      # "messaging" for <weft/messaging.h>
        self.name = name
        self.ret = ret            # "int", "void", "const char *", ...
        self.proto = proto        # the prototype, whitespace collapsed
        self.own = own            # its comment's text (or a group's)
        self.head = head          # the paragraph's first comment, or None
        self.intro = intro        # standalone comments that introduce it
        self.default = default    # the header's threads default, or None


def comment_text(lines):
    """The text of a /* */ comment, without its markers: lines kept."""
    text = "\n".join(lines)
    text = re.sub(r"^\s*/\*+", "", text)
    text = re.sub(r"\*+/\s*$", "", text)
    out = []
    for line in text.split("\n"):
        line = re.sub(r"^\s*\* ?", "", line, count=1) if \
            re.match(r"^\s*\*", line) else line.strip()
        out.append(line.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def items_of(path):
    """The header as a list of items: ("blank",), ("comment", text),
    ("decl", text) and ("code",)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    items = []
    i = 0
    depth = 0
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if depth > 0:
            depth += line.count("{") - line.count("}")
            i += 1
            continue
        if s in ('extern "C" {', "}"):  # C++ linkage, at depth 0
            items.append(("code",))
            i += 1
        elif re.match(r"^struct \w+;$", s):
            i += 1  # a forward declaration stays out of the way
        elif not s:
            items.append(("blank",))
            i += 1
        elif s.startswith("/*"):
            start = i
            while "*/" not in lines[i]:
                i += 1
            items.append(("comment", comment_text(lines[start:i + 1]),
                          lines[start].strip()))
            i += 1
        elif s.startswith("#"):
            while lines[i].rstrip().endswith("\\"):
                i += 1
            items.append(("code",))
            i += 1
        elif s.startswith("WEFT_API") and "(" in "".join(lines[i:i + 3]):
            start = i
            while ";" not in re.sub(r"/\*.*?\*/", "", lines[i]):
                i += 1
            items.append(("decl", " ".join(lines[start:i + 1])))
            i += 1
        else:
            depth += line.count("{") - line.count("}")
            items.append(("code",))
            i += 1
    return items


def parse_decl(text):
    text = re.sub(r"/\*.*?\*/", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"^WEFT_API\s+", "", text)
    text = re.sub(r"\s*WEFT_PRINTF\([^)]*\)", "", text)
    text = text.rstrip(";").strip()
    m = re.match(r"(.*?)\b(weft_[a-z0-9_]+)\s*\((.*)\)$", text)
    if not m:
        return None
    ret = m.group(1).strip()
    return m.group(2), ret, "%s%s%s(%s);" % (
        ret, "" if ret.endswith("*") else " ", m.group(2), m.group(3))


def parse_header(path):
    header = os.path.basename(path)[:-2]
    items = items_of(path)
    decls = []
    intro = []
    default = None
    in_section = False  # after a "---- Title ----" divider
    para = []          # the items of the current paragraph
    group = None       # the comment shared by a run of declarations
    for it in items + [("blank",)]:
        kind = it[0]
        if kind == "blank":
            if para and all(x[0] == "comment" for x in para):
                # Comments that stand alone: an introduction, a divider.
                for c in para:
                    if DIVIDER_RE.match(c[2]):
                        intro, in_section = [], True
                        continue
                    if in_section:
                        intro.append(c[1])
            para, group = [], None
            continue
        if kind == "comment" and DIVIDER_RE.match(it[2]):
            intro, in_section = [], True
        if kind == "comment":
            m = re.search(r"(?:^|\n\n)Threads: (.*?\.)(?=\s|$)", it[1], re.S)
            if m:
                default = " ".join(m.group(1).split())
                default = default[:1].upper() + default[1:]
        prev = para[-1] if para else None
        if kind == "decl":
            parsed = parse_decl(it[1])
            if parsed:
                name, ret, proto = parsed
                if prev is not None and prev[0] == "comment":
                    group = prev[1]
                elif prev is None or prev[0] != "decl":
                    group = None
                head = para[0][1] if para and para[0][0] == "comment" and \
                    len(para) > 1 and para[1][0] == "decl" and \
                    para[0][1] != group and \
                    not re.match(r"weft_[a-z0-9_]+ ", para[0][1]) else None
                d = Decl(header, name, ret, proto, group or "", head,
                         list(intro), default)
                if prev is not None and prev[0] == "decl" and decls:
                    d.group = decls[-1].group
                else:
                    d.group = []
                d.group.append(name)
                decls.append(d)
        para.append(it)
    return decls


def errno_map(headers):
    for h in headers:
        if h.endswith("/core.h"):
            with open(h, encoding="utf-8") as f:
                text = f.read()
            return dict(("WEFT_" + a, b) for a, b in re.findall(
                r'X\((E[A-Z]+),\s*-?\d+,\s*"([^"]*)"\)', text))
    sys.exit("gen-man3: <weft/core.h> is not among the headers")


def sentences(text):
    flat = " ".join(text.split())
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(\"]|weft_)", flat)
    return [p for p in parts if p]


def text_of(d):
    return d.own + ("\n\n" + d.head if d.head else "")


def own_text(d):
    """text_of(d) without the sentences about the other functions of its
    group: in "weft_log_set_format sets ... Returns 0 or WEFT_ENOTSUP.
    weft_log_get_format returns the format.", the first two are
    weft_log_set_format's, the last weft_log_get_format's. A sentence that
    begins with a name of the group is that function's, and so are those
    after it up to the next such; those before any are the whole group's."""
    if len(d.group) < 2:
        return text_of(d)
    keep = []
    for text in (d.own, d.head or ""):
        subject = None
        parts = []
        for s in sentences(text):
            parts.extend(re.split(r"; (?=weft_[a-z0-9_]+ )", s))
        for s in parts:
            m = re.match(r"(weft_[a-z0-9_]+)\b", s)
            if m and m.group(1) in d.group:
                subject = m.group(1)
            if subject in (None, d.name) or re.search(
                    r"\b%s (is|are|returns)\b" % d.name, s):
                keep.append(s)
    return " ".join(keep)


def like_of(d, by_name):
    """The function d's comment says it behaves as ("NAME is OTHER ...")."""
    m = re.match(r"\s*%s is (weft_[a-z0-9_]+)\b" % d.name, d.own)
    if m and m.group(1) in by_name and m.group(1) != d.name:
        return by_name[m.group(1)]
    m = re.search(r"\bas (weft_[a-z0-9_]+) does\b", d.own)
    if m and m.group(1) in by_name and m.group(1) != d.name:
        return by_name[m.group(1)]
    return None


def threads_of(d):
    for text in (d.own, d.head or ""):
        found = [s for s in sentences(text) if THREAD_RE.search(s)]
        if found:
            return found
    return [d.default] if d.default else []


def returns_of(d):
    """The sentences that say what d returns: those that name it ("NAME
    is ...", "NAME returns ..."), else those that say "returns"; not "NAME
    is OTHER ...", which says what OTHER returns is NAME's."""
    named, other = [], []
    for s in sentences(own_text(d)):
        if re.match(r"%s is weft_[a-z0-9_]+\b" % d.name, s):
            continue
        if re.search(r"\b%s (is|are|returns)\b" % d.name, s):
            named.append(s)
        elif re.search(r"\breturns?\b", s, re.I):
            other.append(s)
    return named or other


REF_ERR_RE = re.compile(
    r"\b(?:errors of (weft_[a-z0-9_]+)|(weft_[a-z0-9_]+)'s (?:\w+ )?errors)")


def errors_of(d, by_name=None, seen=None):
    """The WEFT_E codes d's comment names, and those of a function whose
    errors it says it returns ("weft_msvc_request's errors")."""
    codes = []
    for c in ERR_RE.findall(own_text(d)):
        if c not in codes:
            codes.append(c)
    seen = (seen or set()) | {d.name}
    for m in REF_ERR_RE.finditer(own_text(d)):
        other = (by_name or {}).get(m.group(1) or m.group(2))
        if other is not None and other.name not in seen:
            for c in errors_of(other, by_name, seen):
                if c not in codes:
                    codes.append(c)
    return codes


def resolve(d, by_name, what, seen=None):
    """what(d), or what the function d behaves as has, and that function."""
    seen = seen or set()
    got = what(d)
    if got or d.name in seen:
        return got, None
    seen.add(d.name)
    other = like_of(d, by_name)
    if other is None:
        return got, None
    got, via = resolve(other, by_name, what, seen)
    return got, via or other


def check(decls, by_name):
    problems = []
    for d in decls:
        what = []
        if not resolve(d, by_name, threads_of)[0]:
            what.append("a threads statement (which thread may call it)")
        if d.ret != "void" and not resolve(d, by_name, returns_of)[0]:
            what.append("a return-value sentence (\"Returns ...\")")
        if d.ret == "int":
            errs = resolve(d, by_name, lambda x: errors_of(x, by_name))[0]
            if not errs and not NO_ERR_RE.search(own_text(d)):
                what.append("the error codes it returns (WEFT_E...)")
        if what:
            problems.append("%s (<weft/%s.h>) lacks %s" % (
                d.name, d.header, "; ".join(what)))
    return problems


# ---- roff -------------------------------------------------------------------

def esc(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in s)


def line(s):
    s = esc(s)
    if s.startswith(".") or s.startswith("'"):
        s = "\\&" + s
    return s


def paragraphs(text):
    """roff for comment text: blank lines part paragraphs; lines indented
    by two spaces or more stay as they are (tables, examples)."""
    out = []
    para = []
    lit = []

    def flush_para():
        if para:
            out.append(".PP")
            out.append(line(" ".join(" ".join(para).split())))
            para.clear()

    def flush_lit():
        if lit:
            out.append(".PP")
            out.append(".nf")
            out.extend(line(x) for x in lit)
            out.append(".fi")
            lit.clear()

    for ln in text.split("\n"):
        if not ln.strip():
            flush_para()
            flush_lit()
        elif re.match(r"^\s{2,}\S", ln) and not para:
            lit.append(ln)
        elif re.match(r"^\s{2,}\S", ln) and para and re.match(
                r"^\s{2,}[A-Z_]{2,}\s", ln):
            flush_para()
            lit.append(ln)
        else:
            if lit:
                if re.match(r"^\s", ln):
                    lit.append(ln)
                    continue
                flush_lit()
            para.append(ln.strip())
    flush_para()
    flush_lit()
    return out


def synopsis(proto):
    """The prototype, wrapped at 72 columns under its opening parenthesis."""
    head, args = proto.split("(", 1)
    args = args[:-2]  # ");"
    parts = [a.strip() for a in args.split(",")] if args else []
    # Commas inside a function-pointer argument's parentheses stay.
    merged = []
    for p in parts:
        if merged and merged[-1].count("(") > merged[-1].count(")"):
            merged[-1] += ", " + p
        else:
            merged.append(p)
    indent = " " * (len(head) + 1)
    lines = [head + "("]
    for i, a in enumerate(merged):
        piece = a + ("," if i < len(merged) - 1 else ");")
        cur = lines[-1]
        sep = "" if cur.endswith("(") else " "
        if len(cur) + len(sep) + len(piece) > 72 and not cur.endswith("("):
            lines.append(indent + piece)
        else:
            lines[-1] = cur + sep + piece
    if not merged:
        lines[-1] += ");"
    return lines


def first_sentence(d):
    ss = sentences(d.own) if d.own else []
    mine = [x for x in ss if re.match(r"%s\b" % d.name, x)]
    if not mine:
        for x in sentences(own_text(d)):
            m = re.search(r"\b(%s (is|are|returns)\b[^;]*)" % d.name, x)
            if m:
                mine = [m.group(1)]
                break
    ss = mine[:1] or ss
    if not ss:
        return "see " + SECTION_PAGE.get(d.header, "weft_" + d.header) + "(3)"
    s = ss[0]
    m = re.match(r"%s\s+(.*)" % d.name, s, re.S)
    if m:
        s = m.group(1)
    s = s.rstrip(".")
    return " ".join(s.split())


def err_note(code, text):
    """The parenthesis after code in the comment, if there is one."""
    m = re.search(r"\b%s \(([^()]*(?:\([^()]*\)[^()]*)*)\)" % code, text)
    if not m or re.match(r"or\b", m.group(1)) or ERR_RE.search(m.group(1)):
        return None
    return " ".join(m.group(1).split())


def page(d, by_name, errmap, version):
    section = SECTION_PAGE.get(d.header, "weft_" + d.header)
    out = [
        '.\\" SPDX-License-Identifier: MIT',
        '.\\" Generated by docs/man/gen-man3.py from <weft/%s.h>: '
        'edit the header, not this page.' % d.header,
        '.TH %s 3 "" "weft %s" "weft Library Functions"' % (
            esc(d.name), version),
        ".SH NAME",
        "%s \\- %s" % (esc(d.name), esc(first_sentence(d))),
        ".SH LIBRARY",
    ]
    if d.header == "sim":
        out += ["The simulation library for tests (libweft_sim,",
                "\\fI\\-lweft_sim\\fR, CMake target weft::weft_sim), over",
                "the weft library (libweft, \\fI\\-lweft\\fR)."]
    else:
        out += ["weft library (libweft, \\fI\\-lweft\\fR);",
                "compile and link with",
                ".B pkg\\-config \\-\\-cflags \\-\\-libs weft"]
    out += [
        ".SH SYNOPSIS",
        ".nf",
        ".B #include <weft/%s.h>" % esc(d.header),
        ".PP",
    ]
    for ln in synopsis(d.proto):
        out.append(".B \"%s\"" % esc(ln).replace('"', '\\(dq')
                   if ln.startswith(" ") else ".B " + line(ln))
    out.append(".fi")
    out.append(".SH DESCRIPTION")
    desc = d.own or ("No comment of its own; see %s(3)." % section)
    out.extend(paragraphs(desc))
    if d.head:
        out.extend(paragraphs(d.head))
    for intro in d.intro:
        out.extend(paragraphs(intro))

    other_note = lambda via: ".PP\nAs for\n.BR %s (3):" % esc(via.name)

    def sentences_section(title, of):
        """A section of the sentences of(d) gives, or of the function
        d's comment refers to for them."""
        out.append(".SH " + title)
        found, via = resolve(d, by_name, of)
        if via:
            out.append(other_note(via))
        for s in found or ["Not stated."]:
            out.extend([".PP", line(s)])

    if d.ret != "void":
        sentences_section("RETURN VALUE", returns_of)
    errs, via = resolve(d, by_name, lambda x: errors_of(x, by_name))
    if errs or d.ret == "int":
        out.append(".SH ERRORS")
        if via:
            out.append(other_note(via))
        src = own_text(via) if via else own_text(d)
        if not errs:
            out.extend([".PP", "None: the value is not a WEFT_E code."
                        if re.search("not an error code", src)
                        else "As the RETURN VALUE says."])
        for code in errs:
            meaning = errmap.get(code, "")
            note = err_note(code, src)
            for m in REF_ERR_RE.finditer(src):
                other = by_name.get(m.group(1) or m.group(2))
                if note is None and other is not None:
                    note = err_note(code, own_text(other))
            out.append(".TP")
            out.append(".B %s" % esc(code))
            body = meaning[:1].upper() + meaning[1:] if meaning else ""
            if note:
                body += ": " + note if body else note
            out.append(line(body + "." if body else "See the description."))
    sentences_section("THREADS", threads_of)
    out.append(".SH SEE ALSO")
    related = []
    for text in [d.own, d.head or ""] + d.intro:
        for f in FUNC_RE.findall(text):
            if f in by_name and f != d.name and f not in related:
                related.append(f)
    here = os.path.dirname(os.path.abspath(__file__))
    has_section = section != d.name and \
        os.path.exists(os.path.join(here, section + ".3.scd"))
    refs = ([section] if has_section else []) + related + (["weft_strerror"] if errs and
                                  d.name != "weft_strerror" else []) + [""]
    seen = []
    for r in refs:
        if r not in seen:
            seen.append(r)
    outs = []
    for r in seen[:-1]:
        outs.append(".BR %s (3)," % esc(r))
    outs.append(".BR weft (7)")
    out.extend(outs)
    return "\n".join(out) + "\n"


def version_of(headers):
    for h in headers:
        if h.endswith("/core.h"):
            with open(h, encoding="utf-8") as f:
                t = f.read()
            v = [re.search(r"#define WEFT_VERSION_%s (\d+)" % k, t).group(1)
                 for k in ("MAJOR", "MINOR", "PATCH")]
            return ".".join(v)
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("headers", nargs="+")
    a = ap.parse_args()
    headers = sorted(a.headers)
    decls = []
    for h in headers:
        decls.extend(parse_header(h))
    by_name = {}
    for d in decls:
        by_name.setdefault(d.name, d)
    if a.list:
        for d in decls:
            print(d.name)
        return 0
    if a.check:
        problems = check(decls, by_name)
        for p in problems:
            print("FAIL: " + p)
        print("man3: %d exported functions, %d with an incomplete comment" %
              (len(decls), len(problems)))
        return 1 if problems else 0
    if not a.out:
        ap.error("one of --out, --list or --check")
    errmap = errno_map(headers)
    version = version_of(headers)
    os.makedirs(a.out, exist_ok=True)
    made = set()
    for d in decls:
        made.add(d.name + ".3")
        text = page(d, by_name, errmap, version)
        path = os.path.join(a.out, d.name + ".3")
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        if old != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    # The page of a function that is gone goes too.
    for name in os.listdir(a.out):
        path = os.path.join(a.out, name)
        if name.endswith(".3") and name not in made:
            with open(path, encoding="utf-8") as f:
                if "Generated by docs/man/gen-man3.py" in f.read(300):
                    os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
