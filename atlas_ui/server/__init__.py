"""The server: the ASGI app and Streamlit's server settings (asgi.py, server_process.py), the
`attention-atlas` command (cli.py), what the hub-id field may open (hub_policy.py), and the app's
settings (settings.py)."""
