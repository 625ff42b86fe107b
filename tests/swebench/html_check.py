#!/usr/bin/env python3
"""Checks a `rex swebench` report.html as a person sees it, in headless Chromium.

    python3 html_check.py REPORT.html EXPECTED.json

EXPECTED.json: {"instances": {id: {"verdict": ..., "status": ...}}, "resolved": n, "total": n}.

    python3 html_check.py --screenshot=PAGE.png REPORT.html EXPECTED.json   (keeps the screenshot)

Chromium (Debian's `chromium` package, found as `chromium` on PATH, or $CHROMIUM) loads the page
once: it dumps the DOM it built, takes a screenshot and records its network log. The check then
verifies, on the DOM Chromium built (not on the file's text):
- the headline "Resolved X of Y = Z%" and the resolved/total tiles match EXPECTED.json;
- one table row per expected instance, none other, each with its status's text label and its
  verdict code (the verdict is never told by colour alone), ordered errors first, then
  unresolved, then resolved;
- the instance-time histogram: an SVG with as many bars as bins, as many as its bin table has
  rows, whose counts add up to the rows with a time (or the "no times" note when none has one);
- every link: a same-page anchor names an element that exists; any other is relative and points
  at a file or folder that exists relative to the HTML file;
- the page is whole: no script, no external resource (no URL with a scheme in src/href/...,
  no url()/@import in its CSS), and Chromium's network log shows no request from the page;
- the screenshot is not blank.
Exit 0 when all hold, 1 with a message per failure otherwise, 2 on a usage or setup problem
(no Chromium, unreadable files).
"""

from __future__ import annotations

import html.parser
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zlib

TIMEOUT = 120  # seconds for each Chromium run

# What the page calls each status; the check fails when a row shows another label.
STATUS_LABELS = {
    "resolved": "Resolved",
    "unresolved": "Unresolved",
    "error": "Error",
    "empty_patch": "Empty patch",
    "incomplete": "Incomplete",
}
# The table's order: errors first, then unresolved, then the rest, resolved last.
STATUS_RANK = {"error": 0, "unresolved": 1, "empty_patch": 3, "incomplete": 4, "resolved": 5}

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
# Attributes through which a page can make the browser fetch or navigate.
URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "data",
             "background", "cite", "longdesc", "manifest", "ping", "codebase", "archive"}
# Elements a whole page has no use for: each would run code or pull something in.
FORBIDDEN = {"script", "link", "iframe", "frame", "object", "embed", "applet", "base", "img",
             "video", "audio", "source", "track", "picture", "portal", "image", "use",
             "foreignobject"}
SCHEME = re.compile(r"^\s*([a-zA-Z][a-zA-Z0-9+.-]*):")


class Usage(Exception):
    """A problem with the arguments or the machine, not with the report (exit 2)."""


# ---- a small DOM from Chromium's serialization ----

class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: "Node | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list["Node | str"] = []

    def text(self) -> str:
        """textContent, with whitespace runs collapsed."""
        parts: list[str] = []

        def walk(node: Node) -> None:
            for child in node.children:
                if isinstance(child, str):
                    parts.append(child)
                else:
                    walk(child)

        walk(self)
        return " ".join("".join(parts).split())

    def iter(self, tag: str | None = None):
        for child in self.children:
            if isinstance(child, Node):
                if tag is None or child.tag == tag:
                    yield child
                yield from child.iter(tag)

    def find_id(self, ident: str) -> "Node | None":
        # The root keeps an index: links to rows ask for thousands of ids.
        root = self
        while root.parent is not None:
            root = root.parent
        if not hasattr(root, "ids"):
            root.ids = {}
            for n in root.iter():
                root.ids.setdefault(n.attrs.get("id"), n)
        found = root.ids.get(ident)
        return found if found is not None and self in _ancestors(found) else None

    def has_class(self, name: str) -> bool:
        return name in self.attrs.get("class", "").split()

    def find_class(self, tag: str, name: str) -> "Node | None":
        return next((n for n in self.iter(tag) if n.has_class(name)), None)


def _ancestors(node: Node):
    while node is not None:
        yield node
        node = node.parent


class DomBuilder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(node)

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse_dom(text: str) -> Node:
    builder = DomBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


# ---- Chromium ----

def chromium_binary() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if not found:
        raise Usage("chromium not found on PATH: install Debian's `chromium` package "
                    "(apt-get install -y chromium), or set $CHROMIUM")
    return found


def run(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise Usage(f"{what}: Chromium did not finish within {TIMEOUT} s") from e


def chromium_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout
    except subprocess.TimeoutExpired:
        return "unknown"
    m = re.search(r"Chromium\s+[\d.]+", out)
    return m.group(0) if m else out.strip() or "unknown"


def chromium_args(binary: str, profile: pathlib.Path) -> list[str]:
    return [binary, "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={profile}",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--mute-audio", "--hide-scrollbars"]


def page_requests(netlog: pathlib.Path) -> list[str]:
    """The network requests the page made (not Chromium's own background ones): URL requests
    started for a document whose site is file://, or with the page as their initiator."""
    try:
        log = json.loads(netlog.read_text(errors="replace"))
    except (OSError, ValueError):
        # Chromium may leave the log's closing brackets out when it exits fast.
        text = netlog.read_text(errors="replace").rstrip().rstrip(",")
        try:
            log = json.loads(text + "]}")
        except ValueError:
            raise Usage(f"cannot read Chromium's network log {netlog}")
    kinds = {v: k for k, v in log.get("constants", {}).get("logEventTypes", {}).items()}
    urls = []
    for event in log.get("events", []):
        if kinds.get(event.get("type")) != "URL_REQUEST_START_JOB":
            continue
        params = event.get("params", {})
        initiator = params.get("initiator", "")
        from_page = "file://" in params.get("network_isolation_key", "") or \
            initiator == "null" or initiator.startswith("file:")
        if from_page:
            urls.append(params.get("url", "?"))
    return sorted(set(urls))


# ---- the screenshot ----

def png_pixels(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """Width, height, bytes per pixel and the unfiltered rows of an 8-bit, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace != 0:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour})")
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = prev[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                ul = prev[i - channels] if i >= channels else 0
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else ul
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def screenshot_problem(png: pathlib.Path) -> str | None:
    """Why the screenshot looks blank, or None: it must have several colours and some ink."""
    try:
        width, height, channels, rows = png_pixels(png.read_bytes())
    except (OSError, ValueError, zlib.error) as e:
        return f"cannot read the screenshot {png}: {e}"
    colours: dict[bytes, int] = {}
    for row in rows[::4]:  # every 4th row and column is plenty to tell a page from a blank
        for x in range(0, width * channels, channels * 4):
            px = row[x:x + min(channels, 3)]
            colours[px] = colours.get(px, 0) + 1
    sampled = sum(colours.values())
    background = max(colours.values()) if colours else 0
    if len(colours) < 3 or sampled - background < sampled * 0.005:
        return (f"the screenshot ({width}x{height}) is blank: {len(colours)} colour(s), "
                f"{sampled - background} of {sampled} sampled pixels not background")
    return None


# ---- the checks on the DOM ----

class Check:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def fail(self, message: str) -> None:
        self.failures.append(message)

    def many(self, title: str, items: list[str], limit: int = 10) -> None:
        """One failure listing up to `limit` items."""
        if items:
            more = f" (and {len(items) - limit} more)" if len(items) > limit else ""
            self.fail(f"{title}: " + "; ".join(items[:limit]) + more)


def check_headline(c: Check, dom: Node, expected: dict) -> None:
    headline = dom.find_id("headline")
    if headline is None:
        c.fail("no headline (#headline) on the page")
        return
    text = headline.text()
    m = re.search(r"Resolved\s+(\d+)\s+of\s+(\d+)\s*=\s*(\S+)", text)
    if not m:
        c.fail(f"the headline does not read 'Resolved X of Y = Z%': {text!r}")
        return
    resolved, total, pct = int(m.group(1)), int(m.group(2)), m.group(3)
    want_r, want_t = int(expected.get("resolved", 0)), int(expected.get("total", 0))
    if (resolved, total) != (want_r, want_t):
        c.fail(f"the headline says resolved {resolved} of {total}, expected {want_r} of {want_t}")
    if total > 0:
        pm = re.fullmatch(r"([\d.]+)%", pct)
        if not pm or abs(float(pm.group(1)) - 100 * resolved / total) > 0.051:
            c.fail(f"the headline's percentage {pct!r} is not {100 * resolved / total:.1f}%")
    for ident, want in (("n-resolved", want_r), ("n-total", want_t)):
        tile = dom.find_id(ident)
        if tile is None:
            c.fail(f"no #{ident} tile")
        elif tile.text() != str(want):
            c.fail(f"the #{ident} tile shows {tile.text()!r}, expected {want}")
    for ident in ("n-unresolved", "n-error", "n-empty_patch", "n-infra", "n-ambiguous"):
        tile = dom.find_id(ident)
        if tile is None or not re.fullmatch(r"\d+", tile.text()):
            c.fail(f"no count in the #{ident} tile")


def check_rows(c: Check, dom: Node, expected: dict) -> list[Node]:
    want: dict = expected.get("instances", {})
    table = dom.find_id("instance-table")
    if table is None:
        if want:
            c.fail(f"no instance table (#instance-table), expected {len(want)} rows")
        elif dom.find_id("no-instances") is None:
            c.fail("no instance table and no 'No instances' note")
        return []
    body = next(table.iter("tbody"), None)
    rows = [r for r in body.iter("tr")] if body is not None else []
    if len(rows) != len(want):
        c.fail(f"the instance table has {len(rows)} rows, expected {len(want)}")
    seen: set[str] = set()
    wrong: list[str] = []
    ranks: list[tuple[int, str]] = []
    for row in rows:
        cells = [td for td in row.iter("td")]
        ident = row.attrs.get("data-instance", "")
        if not cells or cells[0].text() != " ".join(ident.split()):
            wrong.append(f"row {row.attrs.get('id')}: its first cell does not show {ident!r}")
        if ident in seen:
            wrong.append(f"{ident!r} has more than one row")
        seen.add(ident)
        if ident not in want:
            wrong.append(f"{ident!r} is not an expected instance")
            continue
        status, verdict = want[ident].get("status", ""), want[ident].get("verdict", "")
        ranks.append((STATUS_RANK.get(status, 2), ident))
        cell = next((td for td in cells if td.has_class("verdict")), None)
        if cell is None:
            wrong.append(f"{ident!r}: no verdict cell")
            continue
        badge = cell.find_class("span", "badge")
        label = badge.text() if badge is not None else ""
        want_label = STATUS_LABELS.get(status, status)
        if label != want_label:
            wrong.append(f"{ident!r}: verdict label {label!r}, expected {want_label!r}")
        code = cell.find_class("span", "vcode")
        shown = code.text() if code is not None else ""
        if shown != verdict:
            wrong.append(f"{ident!r}: verdict {shown or 'none'!r}, expected {verdict or 'none'!r}")
        if row.attrs.get("data-status") != status:
            wrong.append(f"{ident!r}: data-status {row.attrs.get('data-status')!r}, "
                         f"expected {status!r}")
    missing = [repr(i) for i in want if i not in seen]
    c.many("instances without a row", missing)
    c.many("wrong rows", wrong)
    if [r for r, _ in ranks] != sorted(r for r, _ in ranks):
        first = next(i for i in range(1, len(ranks)) if ranks[i][0] < ranks[i - 1][0])
        c.fail(f"rows out of order (errors, unresolved, ..., resolved): {ranks[first][1]!r} "
               f"after {ranks[first - 1][1]!r}")
    return rows


def check_histogram(c: Check, dom: Node, rows: list[Node]) -> int:
    timed = sum(1 for row in rows for td in row.iter("td")
                if td.has_class("time") and "data-seconds" in td.attrs)
    svg = dom.find_id("time-histogram")
    if svg is None:
        if timed:
            c.fail(f"no histogram SVG (#time-histogram) though {timed} rows have a time")
        elif dom.find_id("no-times") is None:
            c.fail("no histogram and no 'No instance times' note")
        return 0
    if svg.tag != "svg":
        c.fail(f"#time-histogram is a <{svg.tag}>, not an inline <svg>")
    bars = [r for r in svg.iter("rect") if r.has_class("bar")]
    try:
        bins = int(svg.attrs.get("data-bins", ""))
    except ValueError:
        c.fail("the histogram does not say its bins (data-bins)")
        return len(bars)
    if len(bars) != bins:
        c.fail(f"the histogram has {len(bars)} bars for {bins} bins")
    table = dom.find_id("bin-table")
    if table is not None:
        body = next(table.iter("tbody"), None)
        n = len(list(body.iter("tr"))) if body is not None else 0
        if n != bins:
            c.fail(f"the bin table has {n} rows for {bins} bins")
    try:
        counted = sum(int(b.attrs.get("data-count", "x")) for b in bars)
    except ValueError:
        c.fail("a histogram bar without a count (data-count)")
        return len(bars)
    if counted != timed:
        c.fail(f"the histogram counts {counted} instances, {timed} rows have a time")
    if not re.search(r"second", svg.text(), re.I):
        c.fail("the histogram's axis does not say seconds")
    return len(bars)


def check_links(c: Check, dom: Node, report: pathlib.Path) -> int:
    base = report.resolve().parent
    broken, outside, checked = [], [], 0
    for node in dom.iter():
        for attr in ("href", "xlink:href"):
            if attr not in node.attrs:
                continue
            value = node.attrs[attr]
            if value.startswith("#"):
                if value != "#" and dom.find_id(urllib.parse.unquote(value[1:])) is None:
                    broken.append(f"{value} (no such element)")
                continue
            if SCHEME.match(value) or value.startswith("//"):
                outside.append(value)  # reported by check_whole too
                continue
            checked += 1
            path = urllib.parse.unquote(urllib.parse.urlsplit(value).path)
            target = base / path
            if not target.exists():
                broken.append(f"{value} -> {target} does not exist")
    c.many("links to nothing", broken)
    return checked


def check_whole(c: Check, dom: Node, raw: str, requests: list[str]) -> None:
    found = []
    for node in dom.iter():
        if node.tag in FORBIDDEN:
            found.append(f"<{node.tag}>")
        for name, value in node.attrs.items():
            if name.startswith("on"):
                found.append(f"<{node.tag} {name}=...> (script)")
            elif name in URL_ATTRS:
                m = SCHEME.match(value)
                if (m and m.group(1).lower() != "data") or value.lstrip().startswith("//"):
                    found.append(f"<{node.tag} {name}={value!r}>")
            elif name == "style" and re.search(r"url\s*\(|@import|image-set", value, re.I):
                found.append(f"<{node.tag} style=...url()>")
        if node.tag == "style" and re.search(r"@import|url\s*\(\s*['\"]?(?!data:)", node.text(),
                                             re.I):
            found.append("<style> with url() or @import")
        if node.tag == "meta" and node.attrs.get("http-equiv", "").lower() == "refresh":
            found.append("<meta http-equiv=refresh>")
    c.many("the page is not whole (it runs or fetches something)", sorted(set(found)))
    c.many("the page made network requests", requests)
    head = raw[:1024].lower()
    if not raw.lstrip().lower().startswith("<!doctype html>"):
        c.fail("the file does not start with <!DOCTYPE html>")
    if '<meta charset="utf-8">' not in head:
        c.fail('no <meta charset="utf-8"> in the first 1024 bytes')
    title = next(dom.iter("title"), None)
    if title is None or not title.text():
        c.fail("the page has no title")


def main(argv: list[str]) -> int:
    keep = None
    args = []
    for arg in argv[1:]:
        if arg.startswith("--screenshot="):
            keep = pathlib.Path(arg.split("=", 1)[1])
        else:
            args.append(arg)
    if len(args) != 2:
        print("usage: html_check.py [--screenshot=PAGE.png] REPORT.html EXPECTED.json",
              file=sys.stderr)
        return 2
    report, expected_path = pathlib.Path(args[0]), pathlib.Path(args[1])
    t0 = time.monotonic()
    try:
        try:
            raw = report.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise Usage(f"cannot read {report} as UTF-8: {e}")
        try:
            expected = json.loads(expected_path.read_text())
            if not isinstance(expected.get("instances"), dict):
                raise ValueError("no 'instances' object")
        except (OSError, ValueError) as e:
            raise Usage(f"cannot read {expected_path}: {e}")
        binary = chromium_binary()
        url = report.resolve().as_uri()
        with tempfile.TemporaryDirectory(prefix="rex-html-check-") as tmp:
            tmpdir = pathlib.Path(tmp)
            netlog, shot = tmpdir / "net.json", tmpdir / "shot.png"
            # A 1280x1600 window drawn at half scale: enough to tell a page from a blank one,
            # a quarter of the pixels to decode.
            dump = run(chromium_args(binary, tmpdir / "profile")
                       + [f"--log-net-log={netlog}", "--window-size=1280,1600",
                          "--force-device-scale-factor=0.5", f"--screenshot={shot}", "--dump-dom",
                          url], "loading the page")
            if dump.returncode != 0 or not dump.stdout.strip():
                raise Usage(f"Chromium could not load {report} (exit {dump.returncode}): "
                            + dump.stderr.decode(errors="replace").strip()[-600:])
            requests = page_requests(netlog) if netlog.exists() else []
            blank = screenshot_problem(shot) if shot.exists() else "Chromium wrote no screenshot"
            if keep is not None and shot.exists():
                shutil.copyfile(shot, keep)
        dom = parse_dom(dump.stdout.decode("utf-8", errors="replace"))
    except Usage as e:
        print(f"html_check: {e}", file=sys.stderr)
        return 2

    c = Check()
    check_headline(c, dom, expected)
    rows = check_rows(c, dom, expected)
    bars = check_histogram(c, dom, rows)
    links = check_links(c, dom, report)
    check_whole(c, dom, raw, requests)
    if blank:
        c.fail(blank)
    seconds = time.monotonic() - t0
    if c.failures:
        for failure in c.failures:
            print(f"FAIL {report}: {failure}", file=sys.stderr)
        print(f"html_check: {len(c.failures)} failure(s) in {report} ({seconds:.1f} s)",
              file=sys.stderr)
        return 1
    print(f"html_check: OK {report}: {len(rows)} rows, resolved {expected.get('resolved')} of "
          f"{expected.get('total')}, {bars} histogram bars, {links} log links exist, no request; "
          f"{chromium_version(binary)}, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
