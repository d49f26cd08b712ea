"""The audit's report in a real browser (headless Chromium): the review table holds the top rows
of ``pairs.csv``, a caption written as markup shows as text and runs nothing, the page's own
script runs, no request leaves the page, and the screenshot is a drawn page."""

import csv
import http.server
import json
import shutil
import subprocess
import threading
import typing
from html.parser import HTMLParser

import pytest

from mispair.audit import audit_collection

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (scripts/install.sh installs it)"
)

ATTACK = (
    "<script>document.body.setAttribute('data-pwned','script')</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
)
TINY = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=32",
    "model.word_dim=16",
    "train.epochs=2",
    "train.batch_size=8",
    "division.folds=2",
    "division.rounds=1",  # two folds leave none for nested trust's first round
    "division.epochs=2",
    "division.repeats=1",
]
COLOURS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 60, 220), "yellow": (240, 220, 30)}
SHAPES = ("square", "disc", "bar")
TOP = 20
BROWSER_SERVICES = (
    "update.googleapis.com",
    "clients2.google.com",
    "accounts.google.com",
    "optimizationguide-pa.googleapis.com",
    "content-autofill.googleapis.com",
)
"""Hosts Chromium itself calls on start (component updates, time, sign-in), whatever the page."""


def _draw(path, colour, shape):
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (64, 64), "white")
    box = {"square": (12, 12, 52, 52), "disc": (8, 8, 56, 56), "bar": (4, 26, 60, 38)}[shape]
    draw = ImageDraw.Draw(image)
    (draw.ellipse if shape == "disc" else draw.rectangle)(box, fill=COLOURS[colour])
    image.save(path)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("efficientnet_lite_pytorch")
    data = tmp_path_factory.mktemp("shapes")
    rows = []
    for n, (colour, shape) in enumerate((c, s) for c in COLOURS for s in SHAPES):
        _draw(data / f"{colour}_{shape}.png", colour, shape)
        split = "test" if n % 6 == 5 else "dev" if n % 6 == 4 else "train"
        rows.append((f"{colour}_{shape}.png", f"a {colour} {shape}", split))
    rows[0] = (rows[0][0], ATTACK, rows[0][2])
    with open(data / "captions.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("image", "caption", "split"), *rows])
    out = tmp_path_factory.mktemp("audit")
    audit_collection(data, out, overrides=TINY, plant=0.3, top=TOP, progress=False, log=lambda _: None)
    with open(out / "pairs.csv", newline="", encoding="utf-8") as f:
        return out, list(csv.DictReader(f))


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A proxy that records every request the browser sends out, and answers 404."""

    seen: typing.ClassVar[list[str]] = []

    def _record(self):
        self.seen.append(self.path)
        self.send_error(404)

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, *args):
        pass


def _browse(page, tmp_path, *flags):
    """Run headless Chromium on ``page`` through a recording proxy: (stdout, the requests seen
    but those of the browser's own services)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--disable-domain-reliability",
                f"--user-data-dir={tmp_path / 'profile'}",
                f"--proxy-server=http://127.0.0.1:{server.server_address[1]}",
                "--proxy-bypass-list=<-loopback>",
                "--virtual-time-budget=3000",
                *flags,
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
    page_requests = [r for r in _Recorder.seen if not any(host in r for host in BROWSER_SERVICES)]
    return done.stdout, page_requests


class _Page(HTMLParser):
    """The body's attributes, every ``<img>``'s ``src``, every address an element names
    (``src``, ``href``, ``action``, ...) and, per row of the review table, its pair id and the
    text of its caption."""

    def __init__(self):
        super().__init__()
        self.body, self.images, self.rows, self._caption = {}, [], [], None
        self.addresses = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.addresses += [v for k, v in attrs.items() if k in ("src", "href", "action", "srcset", "poster")]
        if tag == "body":
            self.body = attrs
        elif tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "tr" and "data-pair-id" in attrs:
            self.rows.append([attrs["data-pair-id"], ""])
        elif tag == "div" and attrs.get("class") == "caption" and self.rows:
            self._caption = []

    def handle_endtag(self, tag):
        if tag == "div" and self._caption is not None:
            self.rows[-1][1] = " ".join("".join(self._caption).split())
            self._caption = None

    def handle_data(self, data):
        if self._caption is not None:
            self._caption.append(data)


def test_the_review_table_holds_the_top_rows_and_the_attack_is_text(report, tmp_path):
    out, rows = report
    dom, requests = _browse(out / "report.html", tmp_path, "--dump-dom")
    page = _Page()
    page.feed(dom)
    assert page.body.get("data-ready") == "1"  # the page's own script ran (its hash is allowed)
    assert "data-pwned" not in page.body  # neither the caption's script nor its onerror ran
    assert [r[0] for r in page.rows] == [r["pair_id"] for r in rows[:TOP]]
    assert [r[1] for r in page.rows] == [" ".join(r["caption"].split()) for r in rows[:TOP]]
    thumbs = [src for src in page.images if not src.startswith("data:image/")]
    assert thumbs and all(src.startswith("thumbs/") and (out / src).is_file() for src in thumbs)
    attack_rows = [r for r in rows if r["caption"] == ATTACK]
    assert len(attack_rows) == 1  # the caption survives as text in pairs.csv too
    assert any(r[1] == ATTACK for r in page.rows)  # every train pair is in the table
    assert requests == []
    local = ("data:", "thumbs/", "pairs.js")
    assert all(a.startswith(local) for a in page.addresses)  # nothing that could be fetched off the folder
    assert "url(http" not in dom and "@import" not in dom


def test_the_attack_is_escaped_in_the_file(report):
    out, _ = report
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script>document.body" not in html and "<img src=x" not in html
    assert "&lt;script" not in html  # no caption is in the page: they come from pairs.js, set as text
    data = (out / "pairs.js").read_text(encoding="utf-8")
    assert json.dumps(ATTACK)[1:-1] in data  # as a JSON string, not markup


def test_the_harness_sees_a_request_that_leaves_a_page(tmp_path):
    page = tmp_path / "leaky.html"
    page.write_text('<html><body><img src="http://example.invalid/pixel.png"></body></html>')
    _, requests = _browse(page, tmp_path, "--dump-dom")
    assert any("example.invalid" in r for r in requests)


def test_the_screenshot_is_a_drawn_page(report, tmp_path):
    from PIL import Image

    out, _ = report
    shot = tmp_path / "report.png"
    _browse(out / "report.html", tmp_path, f"--screenshot={shot}", "--window-size=1280,1600")
    with Image.open(shot) as image:
        assert image.size == (1280, 1600)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, plots and thumbnails, not a blank page
