"""The `attention-atlas` command (pyproject.toml): its arguments, its pins, and a real start."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from atlas_ui.server.asgi import chart_chunk, early_import_script
from atlas_ui.server.cli import APP, build_command
from serving.servers import free_port, stop_server, wait_healthy

ROOT = Path(__file__).resolve().parent.parent


def test_models_reach_the_app_and_server_flags_are_set(tiny_dir):
    command, env = build_command([str(tiny_dir), "Helsinki-NLP/opus-mt-en-de", "--port", "8600",
                                  "--", "--theme.base", "dark"], environ={})
    assert command[:3] == ["streamlit", "run", str(APP)] and APP.is_file()
    assert env["ATLAS_MODELS"].split(os.pathsep) == [str(tiny_dir.resolve()), "Helsinki-NLP/opus-mt-en-de"]
    flags = dict(zip(command[3::2], command[4::2]))
    assert flags["--server.port"] == "8600" and flags["--server.fileWatcherType"] == "none"
    assert flags["--client.showErrorDetails"] == "none" and command[-2:] == ["--theme.base", "dark"]


@pytest.mark.parametrize("bad", ["no/such/./dir", "missing-model", "."])
def test_a_bad_model_argument_is_named(bad, capsys):
    with pytest.raises(SystemExit):
        build_command([bad], environ={})
    assert bad in capsys.readouterr().err


def test_pyproject_pins_match_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["attention-atlas"] == "atlas_ui.server.cli:main"
    wanted = {line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#") and not re.match(r"(pytest|playwright)\b", line)}
    assert set(project["dependencies"]) == wanted


def test_every_package_of_the_app_is_installed():
    """pip install . ships the packages pyproject.toml lists: each folder with an __init__.py."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for top in ("transformer", "viz", "atlas_ui")
             for init in (ROOT / top).rglob("__init__.py")}
    assert found == listed


def test_the_command_starts_the_app_with_the_model_first(tiny_dir, tmp_path):
    from streamlit.testing.v1 import AppTest
    port = free_port()
    log = open(tmp_path / "cli.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "atlas_ui.server.cli", str(tiny_dir), "--port", str(port), "--",
                                "--server.address", "127.0.0.1"], cwd=tmp_path, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, timeout=90, port=port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
            page = response.read()                # served by streamlit_app.py's st.App (atlas_ui/server/asgi.py)
        assert early_import_script(chart_chunk()) in page
    finally:
        stop_server(process)
    _, env = build_command([str(tiny_dir)], environ={})
    old = os.environ.get("ATLAS_MODELS")
    os.environ["ATLAS_MODELS"] = env["ATLAS_MODELS"]
    try:
        at = AppTest.from_file(str(APP), default_timeout=120).run()
    finally:
        os.environ.pop("ATLAS_MODELS") if old is None else os.environ.__setitem__("ATLAS_MODELS", old)
    assert not at.exception
    assert at.selectbox(key="model").value == tiny_dir.name       # the named model is the one opened
    assert at.main.text and at.main.text[0].value.strip()
