"""`attention-atlas [MODEL ...] [-- STREAMLIT OPTIONS]`: start the app with these models.

MODEL is a model directory (ours, or a Hugging Face `save_pretrained` one) or a Hugging Face hub
id (downloaded on first use, so online only). The names reach the app in $ATLAS_MODELS; the first
one is opened. Models named here are the operator's choice and always open; what the sidebar's
hub-id field (and a share link's `hub=`) may open is set by --hub (ATLAS_HUB: off, allow:<id>,<id>
or any, with --hub-max-gb as the cap for any; atlas_ui/server/hub_policy.py). The server settings of .streamlit/config.toml are passed as flags, since an
installed command runs from any folder.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from atlas_ui.server.hub_policy import DEFAULT_MAX_GB, read_policy

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")      # owner/name
APP = Path(__file__).resolve().parent / "streamlit_app.py"
SERVER_FLAGS = ("--server.headless", "true", "--server.fileWatcherType", "none", "--server.runOnSave", "false",
                "--client.showErrorDetails", "none", "--client.toolbarMode", "viewer",
                "--runner.magicEnabled", "false", "--browser.gatherUsageStats", "false")


def build_command(argv: list[str], environ=os.environ) -> tuple[list[str], dict]:
    """(streamlit's argv, environment) for these command-line arguments."""
    parser = argparse.ArgumentParser(prog="attention-atlas", description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", metavar="MODEL", help="model directory or Hugging Face hub id")
    parser.add_argument("--port", type=int, default=None, help="server port (default: Streamlit's 8501)")
    parser.add_argument("--hub", default=None, metavar="POLICY",
                        help="what the sidebar's hub-id field may open: off, allow:<id>,<id> or any "
                             "(sets ATLAS_HUB; default: any, up to ATLAS_HUB_MAX_GB)")
    parser.add_argument("--hub-max-gb", type=float, default=None, metavar="GB",
                        help=f"the size cap of --hub any, in GB of files (sets ATLAS_HUB_MAX_GB; "
                             f"default {DEFAULT_MAX_GB:g})")
    own, _, extra = _split(argv)
    args = parser.parse_args(own)
    models = []
    for model in args.models:
        path = Path(model).expanduser()
        if path.exists():
            if not (path / "config.json").is_file():
                parser.error(f"{model}: no config.json in this directory; is it a model directory?")
            models.append(str(path.resolve()))
        elif HUB_ID.match(model):
            models.append(model)                                    # a hub id
        else:
            parser.error(f"{model}: no such directory (nor a hub id of the form owner/name)")
    env = dict(environ)
    if args.hub is not None:
        policy = read_policy({"ATLAS_HUB": args.hub})
        if policy.mode == "off" and args.hub.strip().lower() != "off":
            parser.error(f"--hub {args.hub}: expected off, allow:<id>,<id> (hub ids) or any")
        env["ATLAS_HUB"] = args.hub.strip()
    if args.hub_max_gb is not None:
        if not 0 < args.hub_max_gb < float("inf"):
            parser.error("--hub-max-gb: expected a positive number of GB")
        env["ATLAS_HUB_MAX_GB"] = f"{args.hub_max_gb:g}"
    if models:
        env["ATLAS_MODELS"] = os.pathsep.join(models)
    command = ["streamlit", "run", str(APP), *SERVER_FLAGS]
    if args.port is not None:
        command += ["--server.port", str(args.port)]
    return command + extra, env


def _split(argv: list[str]) -> tuple[list[str], str, list[str]]:
    return (argv[: argv.index("--")], "--", argv[argv.index("--") + 1:]) if "--" in argv else (argv, "", [])


def main(argv: list[str] | None = None) -> None:
    command, env = build_command(sys.argv[1:] if argv is None else argv)
    os.environ.clear()
    os.environ.update(env)
    from streamlit.web import cli as streamlit_cli
    sys.argv = command
    sys.exit(streamlit_cli.main())


if __name__ == "__main__":
    main()
