"""Attention Atlas: `streamlit run app.py`. The UI lives in atlas_ui/, the figures in viz/.

This file has two roles. `streamlit run app.py` finds `app` below, an st.App (Streamlit's ASGI
server with atlas_ui/server/asgi.py's middleware: the page starts loading the chart library at once;
and the route a room's followers poll, atlas_ui/server/room_http.py), and that server runs this same
file for every session, where it draws the page. AppTest runs it as a page too.
"""
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))   # no resolve(): this runs on every script run
if ROOT not in sys.path:           # AppTest and `streamlit run` from another folder
    sys.path.insert(0, ROOT)

import streamlit as st  # noqa: E402
from streamlit.runtime.scriptrunner import get_script_run_ctx  # noqa: E402

if get_script_run_ctx(suppress_warning=True) is None:     # imported by the server: the application
    from atlas_ui.server.asgi import import_page_modules, page_middleware
    from atlas_ui.server.room_http import room_routes
    from atlas_ui.server.server_process import limit_malloc_arenas, send_without_delay
    limit_malloc_arenas()           # before any session's thread exists
    send_without_delay()            # Streamlit's socket is bound, no connection accepted yet
    import_page_modules()
    app = st.App(__file__, middleware=page_middleware(), routes=room_routes())   # rooms' version polls
else:                                                       # a session's script run: the page
    from atlas_ui.page.main import run
    run()
