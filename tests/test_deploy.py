"""The Dockerfile and the Hugging Face Space settings agree with the repository.

No image is built here (no docker on the test machines): these read the files and check what a
build or a Space would trip over: a torch pin that drifted from requirements.txt (pulling another,
CUDA, build), a COPY of a path that is gone, a package the app imports but the image lacks, a port
or health path that does not match what Streamlit and the Space use.
"""
from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
SPACE_DOC = ROOT / "deploy" / "huggingface-space.md"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "the Dockerfile ends inside a continued line"
    return [(parts[0].upper(), parts[1] if len(parts) > 1 else "")
            for parts in (entry.strip().split(None, 1) for entry in logical)]


def arguments(name: str) -> list[str]:
    return [args for instruction, args in instructions() if instruction == name]


def requirement_pin(package: str) -> str:
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        match = re.match(rf"^{re.escape(package)}==([^\s#;]+)", line.strip())
        if match:
            return match.group(1)
    raise AssertionError(f"requirements.txt has no exact pin for {package}")


def front_matter() -> dict[str, str]:
    """The YAML front matter block that deploy/huggingface-space.md tells to put in the Space's README."""
    match = re.search(r"```yaml\n---\n(.*?)\n---\n```", SPACE_DOC.read_text(encoding="utf-8"), re.S)
    assert match, "deploy/huggingface-space.md has no ```yaml block with --- front matter ---"
    fields = {}
    for line in match.group(1).splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def entrypoint() -> str:
    """The command line the container runs (ENTRYPOINT and CMD, exec form, sh -c unwrapped)."""
    words = []
    for name in ("ENTRYPOINT", "CMD"):
        for args in arguments(name):
            words += json.loads(args)          # exec form only: shell form would not forward SIGTERM
    if words[:2] == ["sh", "-c"]:
        return words[2]
    return shlex.join(words)


def copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY from the build context (flags such as --chown dropped)."""
    found = []
    for args in arguments("COPY") + arguments("ADD"):
        words = [word for word in shlex.split(args) if not word.startswith("--")]
        assert not any(w.startswith("--from") for w in shlex.split(args)), "multi-stage COPY: extend this test"
        found.append((words[:-1], words[-1]))
    return found


TEST_ONLY = {"pytest", "pytest-xdist", "playwright"}        # requirements.txt's packages for the tests alone


def test_the_image_installs_every_requirement_but_the_tests_own():
    """The Dockerfile drops the test-only lines of requirements.txt with a grep pattern; a new test
    package (pytest-xdist) must be dropped too, and nothing the app needs."""
    command = next(args for args in arguments("RUN") if "grep -vE" in args)
    pattern = re.search(r"grep -vE '([^']+)' requirements\.txt", command).group(1)
    names = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names[re.match(r"[A-Za-z0-9_.\-]+", line).group(0)] = line
    dropped = {name for name, line in names.items() if re.search(pattern, line)}
    assert dropped == TEST_ONLY & set(names) and {"pytest", "pytest-xdist"} <= dropped, dropped


def test_base_image_is_python_311_slim():
    assert arguments("FROM") == ["python:3.11-slim"]


def test_torch_is_requirements_pin_from_the_cpu_index():
    pin = requirement_pin("torch")
    installs = [args for args in arguments("RUN") if "pip install" in args]
    torch_pins = re.findall(r"\btorch==([^\s\"']+)", " ".join(installs))
    assert torch_pins == [pin], f"Dockerfile installs torch {torch_pins}, requirements.txt pins {pin}"
    for command in (part for args in installs for part in args.split("&&") if "pip install" in part):
        assert CPU_INDEX in command, f"a pip install without the CPU index could pull CUDA torch: {command.strip()}"
    # the requirements install must not bring its own (other) torch: it reads requirements.txt
    assert any("requirements" in args for args in installs)


def test_entrypoint_runs_the_app_headless_on_all_interfaces():
    command = entrypoint()
    assert "streamlit run app.py" in command
    assert (ROOT / "app.py").is_file()
    assert "--server.address 0.0.0.0" in command
    assert "--server.headless true" in command
    assert "--browser.gatherUsageStats false" in command
    assert command.startswith("exec "), "exec: streamlit must be PID 1 to get the stop signal"


def test_ports_agree_with_the_space():
    space = front_matter()
    assert space.get("sdk") == "docker"
    port = space.get("app_port")
    assert arguments("EXPOSE") == [port]
    assert f"--server.port ${{PORT:-{port}}}" in entrypoint()
    env = " ".join(arguments("ENV"))
    assert re.search(rf"\bPORT={port}\b", env), "ENV PORT default differs from app_port"


def test_healthcheck_asks_streamlit_health_without_curl():
    (check,) = arguments("HEALTHCHECK")
    assert "/_stcore/health" in check
    assert "http://127.0.0.1:" in check
    assert "CMD python -c" in check and "urllib.request" in check
    assert "curl" not in check and "wget" not in check           # neither is in python:3.11-slim
    code = re.search(r'CMD python -c "(.*)"$', check).group(1)
    ast.parse(code)                                                 # the one-liner is valid Python


def test_runs_as_a_non_root_user():
    users = arguments("USER")
    assert users and users[-1] not in ("root", "0")
    order = [name for name, _ in instructions()]
    assert order.index("USER") < order.index("ENTRYPOINT")


def test_every_copied_path_exists_and_is_not_dockerignored():
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    sources = [source for sources, _ in copies() for source in sources]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such path in the repository"
        assert source.rstrip("/") not in ignored, f"COPY {source}, but .dockerignore leaves it out"


def local_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {name for name in names if (ROOT / name).is_dir() or (ROOT / f"{name}.py").is_file()}


@pytest.mark.parametrize("needed", [".streamlit/config.toml", "pretrained"])
def test_image_has_the_settings_and_models(needed):
    copied = {source.rstrip("/") for sources, _ in copies() for source in sources}
    assert any(needed == source or needed.startswith(source + "/") or source == "." for source in copied), needed


def test_image_has_every_package_the_app_imports():
    """app.py's repository imports, and theirs, transitively, are all copied into the image."""
    copied = {source.rstrip("/") for sources, _ in copies() for source in sources}
    seen, todo = set(), ["app.py"]
    while todo:
        entry = ROOT / todo.pop()
        files = [entry] if entry.is_file() else sorted(entry.rglob("*.py"))
        for file in files:
            for name in local_imports(file) - seen:
                seen.add(name)
                todo.append(name if (ROOT / name).is_dir() else f"{name}.py")
    assert {"atlas_ui", "viz", "transformer"} <= seen
    missing = {name for name in seen if name not in copied and f"{name}.py" not in copied and "." not in copied}
    assert not missing, f"the app imports {sorted(missing)}, which the Dockerfile does not COPY"


def env_value(name: str) -> str | None:
    """The value an ENV instruction gives `name` (key=value form), the last one winning."""
    value = None
    for args in arguments("ENV"):
        for word in shlex.split(args):
            key, sep, rest = word.partition("=")
            if sep and key == name:
                value = rest
    return value


def test_the_image_opens_no_path_and_only_a_short_list_of_small_hub_models():
    """A public server: the hub-id field's default in the image is an allow-list (or off), never
    `any` and never unset (unset means any, a developer's default); the Space notes say the same."""
    from atlas_ui.server.hub_policy import read_policy
    setting = env_value("ATLAS_HUB")
    assert setting, "the Dockerfile sets no ATLAS_HUB: the image would open any hub model"
    policy = read_policy({"ATLAS_HUB": setting})
    assert policy.mode in ("off", "allow"), setting
    if policy.mode == "allow":
        assert len(policy.allowed) <= 5 and setting == "allow:" + ",".join(policy.allowed), setting
        assert all(model.startswith("Helsinki-NLP/opus-mt-") for model in policy.allowed), policy.allowed
    notes = SPACE_DOC.read_text(encoding="utf-8")
    assert f"ATLAS_HUB={setting}" in notes and "ATLAS_HUB=off" in notes and "ATLAS_HUB_MAX_GB" in notes
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"ATLAS_HUB={setting}" in readme, "the README states the image's default"
