"""What the sidebar's hub-id field (and a share link's `hub=`) may open: the operator decides.

The field's text is a Hugging Face hub id or nothing: it is checked as one (letters, digits, `-`,
`_`, `.`; `name` or `owner/name`; no leading `.`, `/` or `~`, no `..`) before anything touches the
file system or the network, and it never reaches `Translator.load`: the app loads the directory
that the hub cache gives for it (`open_hub`). Paths are for the operator only (ATLAS_MODELS_DIR,
the `attention-atlas` command line, the Python API).

    ATLAS_HUB=off                       the field is not offered; `hub=` links are refused
    ATLAS_HUB=allow:<id>,<id>,...       only these ids
    ATLAS_HUB=any                       any hub model whose files are at most ATLAS_HUB_MAX_GB
    ATLAS_HUB_MAX_GB=<n>                the cap for `any` (default 3), checked against the hub's file
                                        sizes before anything downloads

Unset, ATLAS_HUB is `any` (a developer's own machine); the Docker image sets a short allow-list.
An ATLAS_HUB that cannot be read means `off`: a typo must not open the server.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from transformer.hf import load as hf_load
from transformer.hf.runtime import runtime

LOG = logging.getLogger("atlas_ui")
DEFAULT_HUB = "any"
DEFAULT_MAX_GB = 3.0
GB = 1024 ** 3
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?"
HUB_ID = re.compile(rf"(?:{_PART}/)?{_PART}", re.ASCII)
EXAMPLE = "Helsinki-NLP/opus-mt-en-de"

# The refusals. None of them holds the text that was typed or linked, so they read the same for
# every path, existing or not; only the policy's own words change them.
OFF_MESSAGE = ("This server does not open Hugging Face hub models: its operator turned the hub-id field "
               "off. Pick one of the models in the list.")
NOT_A_MODEL_MESSAGE = ("That is not a Hugging Face hub model this server can open. The field takes the id of a "
                       f"model on the Hugging Face hub, such as {EXAMPLE}.")


class HubRefused(ValueError):
    """The policy does not let the field open this text (the message names no file)."""


@dataclass(frozen=True)
class HubPolicy:
    mode: str                       # "off", "allow" or "any"
    allowed: tuple = ()             # mode "allow": the ids
    max_bytes: int = int(DEFAULT_MAX_GB * GB)   # mode "any": the cap on the files downloaded

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def describe(self) -> str:
        """One line for the sidebar: what the field accepts on this server."""
        if self.mode == "off":
            return "The operator of this server turned the Hugging Face hub-id field off."
        if self.mode == "allow":
            return "This server opens these hub models: " + ", ".join(self.allowed) + "."
        return f"Any hub translation model up to {gigabytes(self.max_bytes)} GB; downloaded once, so the " \
               "server must be online."

    def refusal(self) -> str:
        """The one message for text this policy does not open, whatever the text is."""
        if self.mode == "off":
            return OFF_MESSAGE
        if self.mode == "allow":
            return "This server opens only these Hugging Face hub models: " + ", ".join(self.allowed) + "."
        return NOT_A_MODEL_MESSAGE

    def check(self, text: str) -> str:
        """The hub id that `text` is, if this policy lets the field open it; else HubRefused.
        Looks at the text only: no file system, no network."""
        if self.mode == "off":
            raise HubRefused(self.refusal())
        repo_id = text.strip() if isinstance(text, str) else ""
        if not is_hub_id(repo_id) or (self.mode == "allow" and repo_id not in self.allowed):
            raise HubRefused(self.refusal())
        return repo_id


def gigabytes(count: float) -> str:
    """Bytes as GB for a message: '3', '0.31', '12'."""
    value = count / GB
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def is_hub_id(text) -> bool:
    """A syntactically valid hub id: `name` or `owner/name`, ASCII letters, digits, `-`, `_`, `.`,
    each part starting and ending with a letter or digit, no `..` or `--`, at most 96 characters a part."""
    return (isinstance(text, str) and HUB_ID.fullmatch(text) is not None and ".." not in text
            and "--" not in text and not text.endswith(".git"))


def read_policy(environ=os.environ) -> HubPolicy:
    """The policy of $ATLAS_HUB and $ATLAS_HUB_MAX_GB (see the module's docstring)."""
    value = environ.get("ATLAS_HUB", "").strip() or DEFAULT_HUB
    max_bytes = _max_bytes(environ.get("ATLAS_HUB_MAX_GB", ""))
    mode, _, rest = value.partition(":")
    mode = mode.strip().lower()
    if mode == "any" and not rest.strip():
        return HubPolicy("any", max_bytes=max_bytes)
    if mode == "allow":
        items = [item.strip() for item in rest.split(",") if item.strip()]
        allowed = tuple(dict.fromkeys(item for item in items if is_hub_id(item)))
        for item in items:
            if not is_hub_id(item):
                LOG.warning("ATLAS_HUB: %r is not a hub id, left out of the allow-list", item)
        if allowed:
            return HubPolicy("allow", allowed, max_bytes)
        LOG.warning("ATLAS_HUB=allow: with no hub id: the hub-id field is off")
        return HubPolicy("off")
    if mode != "off":
        LOG.warning("ATLAS_HUB=%r: expected off, allow:<id>,<id> or any; the hub-id field is off", value)
    return HubPolicy("off")


def _max_bytes(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = DEFAULT_MAX_GB if not text.strip() else -1.0
    if not value > 0 or value == float("inf"):
        if text.strip():
            LOG.warning("ATLAS_HUB_MAX_GB=%r: expected a positive number; using %s", text, DEFAULT_MAX_GB)
        value = DEFAULT_MAX_GB
    return int(value * GB)


# ---- the hub (called only with an id that `HubPolicy.check` returned) ----

_resolved: dict = {}                       # (policy, hub id) -> snapshot directory
_download_lock = threading.Lock()          # downloads take turns: a room opening one link downloads once


def resolved(policy: HubPolicy, repo_id: str) -> Path | None:
    """The directory opened already in this process for this id, or None (then `open_hub` may download)."""
    path = _resolved.get((policy, repo_id))
    return path if path is not None and path.is_dir() else None


def open_hub(policy: HubPolicy, text: str) -> Path:
    """The local snapshot directory (in the Hugging Face cache) of the hub model `text` names, fetched
    if the policy allows it; this directory, not the text, is what the app loads.

    HubRefused when the policy does not open it (nothing touched), or when the hub does not know the
    id or its files are over the cap (checked against the hub's file sizes before any download);
    FileNotFoundError when it is not cached and the server is offline or the hub cannot be reached."""
    repo_id = policy.check(text)
    path = resolved(policy, repo_id)
    if path is not None:
        return path
    with _download_lock:
        path = resolved(policy, repo_id) or _fetch(policy, repo_id)
        _resolved[(policy, repo_id)] = path
        return path


def _fetch(policy: HubPolicy, repo_id: str) -> Path:
    """Online: the hub's metadata first (is it a model? its files' sizes under the cap?), then the
    download of exactly that revision. Offline, or with the hub unreachable: the local cache only."""
    hf = runtime()                         # the hub's names, imported once for every thread
    huggingface_hub, RepositoryNotFoundError, RevisionNotFoundError = (
        hf.hub, hf.RepositoryNotFoundError, hf.RevisionNotFoundError)
    unreachable = None
    if not hf_load._offline():
        try:
            info = huggingface_hub.HfApi().model_info(repo_id, files_metadata=True, timeout=hf_load.HUB_TIMEOUT)
        except (RepositoryNotFoundError, RevisionNotFoundError):     # gated repositories too (a subclass)
            raise HubRefused(policy.refusal()) from None
        except Exception as exc:
            unreachable = exc
        else:
            if policy.mode == "any":
                size = download_size(info)
                if size is None or size > policy.max_bytes:
                    raise HubRefused(_over_cap(size, policy))
            try:
                return Path(huggingface_hub.snapshot_download(
                    repo_id, revision=getattr(info, "sha", None), allow_patterns=hf_load.HUB_FILES,
                    etag_timeout=hf_load.HUB_TIMEOUT))
            except Exception as exc:
                raise FileNotFoundError(f"{repo_id}: the download from the Hugging Face hub failed "
                                        f"({type(exc).__name__})") from None
    try:                                   # the cache only: nothing is downloaded
        path = Path(huggingface_hub.snapshot_download(repo_id, local_files_only=True, allow_patterns=hf_load.HUB_FILES))
    except Exception:
        if unreachable is not None:
            raise FileNotFoundError(f"{repo_id}: not in this server's Hugging Face cache, and the hub could not "
                                    f"be reached ({type(unreachable).__name__})") from None
        raise FileNotFoundError(f"{repo_id}: not in this server's Hugging Face cache, and the server is "
                                "offline (HF_HUB_OFFLINE is set)") from None
    size = _cached_size(path) if policy.mode == "any" else 0
    if size > policy.max_bytes:            # on disk already, but it would still fill the memory
        raise HubRefused(_over_cap(size, policy))
    return path


def download_size(info) -> int | None:
    """Bytes of the files snapshot_download would fetch (transformer/hf/load.py HUB_FILES), from the
    hub's metadata (model_info with files_metadata=True); None when a size is missing."""
    total = 0
    siblings = info.siblings or []
    for sibling in runtime().filter_repo_objects(siblings, allow_patterns=hf_load.HUB_FILES, key=lambda s: s.rfilename):
        size = sibling.size if sibling.size is not None else getattr(sibling.lfs, "size", None)
        if not isinstance(size, int):
            return None
        total += size
    return total


def _cached_size(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def _over_cap(size: int | None, policy: HubPolicy) -> str:
    if size is None:
        return (f"This server opens hub models of at most {gigabytes(policy.max_bytes)} GB, and the hub did not "
                "give the size of every file of that one.")
    return (f"That model's files are {gigabytes(size)} GB, over the {gigabytes(policy.max_bytes)} GB this server "
            "opens.")


def hub_name(path) -> str | None:
    """'owner/name' of a snapshot directory in the Hugging Face cache (…/models--owner--name/snapshots/<sha>)."""
    parts = Path(str(path)).parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/")
    return None
