"""The app as a module of the installed package: what `attention-atlas` hands to `streamlit run`
(app.py at the repository root does the same from a checkout, and has the same two roles: the
server's st.App when imported, the page in a session's script run)."""
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

if get_script_run_ctx(suppress_warning=True) is None:     # imported by the server: the application
    from atlas_ui.server.asgi import import_page_modules, page_middleware
    from atlas_ui.server.room_http import room_routes
    import_page_modules()
    app = st.App(__file__, middleware=page_middleware(), routes=room_routes())   # rooms' version polls
else:                                                       # a session's script run: the page
    from atlas_ui.page.main import run
    run()
