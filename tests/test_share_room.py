"""The share link for a room: a copy button and a QR code of exactly the link, drawn only while the
"Copy the link, or show its QR code" expander is open (a new tab pays nothing for them)."""
from __future__ import annotations

import base64

import segno

from atlas_ui.page.share import qr_svg
from test_app import check_clean, new_app, share_link


def test_the_qr_code_and_the_copy_box_hold_the_share_link():
    at = new_app()
    at.query_params.update(view="Overview", kind="cross")
    at.run()
    assert not at.sidebar.code and not at.get("image"), "closed: nothing drawn"
    link = share_link(at)
    at.session_state["share_open"] = True                  # what a click on the expander does
    at.run()
    check_clean(at, "share open")
    assert [code.value for code in at.sidebar.code] == [link]
    images = at.get("image")
    assert len(images) == 1
    url = images[0].proto.imgs[0].url
    assert url.startswith("data:image/svg+xml;base64,")
    shown = base64.b64decode(url.split(",", 1)[1]).decode()
    # Streamlit adds the SVG namespace; the drawing is the QR code of the link, module for module
    assert " ".join(shown.replace('xmlns="http://www.w3.org/2000/svg"', "").split()) == " ".join(qr_svg(link).split())


def test_the_qr_code_encodes_the_link_exactly():
    link = "http://room.example:8501/?view=Overview&kind=cross&sentence=Zwei+M%C3%A4nner"
    svg = qr_svg(link)
    assert svg.startswith("<svg") and 'fill="#fff"' in svg
    assert svg == segno.make(link, error="m").svg_inline(scale=8, dark="#000", light="#fff", border=4)
    # the matrix segno drew is the one for this link and no other
    assert segno.make(link, error="m").matrix != segno.make(link + "x", error="m").matrix
