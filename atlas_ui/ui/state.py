"""Widget state that survives views being hidden, and a basic URL (st.query_params) sync.

Streamlit forgets the value of a widget that is not drawn in a run. Every widget here keeps
a copy under STORE + key and puts it back before it is drawn again, after checking that the
value is still valid (a new model can have fewer layers, a URL can hold anything).
"""
from __future__ import annotations

import streamlit as st

STORE = "_keep_"
BOOTED = "_booted"
ABLATE_PREFIX = "ablate_"      # session key per (kind, layer): the list of heads switched off


def parse_flag(value: str) -> bool:
    if value in ("1", "true", "True", "yes", "on"):
        return True
    if value in ("0", "false", "False", "no", "off", ""):
        return False
    raise ValueError(f"not a flag: {value!r}")


def parse_count(value: str) -> int:
    """A number counted from 1 in a link (step_no=5: "Step 5 of 17") as the 0-based index it names."""
    number = int(value)
    if number < 1:
        raise ValueError(f"not a count from 1: {value!r}")
    return number - 1


# URL parameter -> (session key, parser). `hub` is kept as text: what it may open is decided by the
# operator's policy before anything is loaded (atlas_ui/server/hub_policy.py; never a path).
URL_FIELDS = {"model": ("model", str), "hub": ("hub_id", str), "src": ("source_lang", str),
              "tgt": ("target_lang", str), "sentence": ("text", str), "ref": ("reference", str),
              "beam": ("beam_size", int), "view": ("view", str), "kind": ("kind", str),
              "layer": ("layer", int), "head": ("head", int), "step": ("step", int),
              "words": ("words", parse_flag), "present": ("presenter", parse_flag), "norm": ("norm", parse_flag),
              "branch": ("branch_link", str), "whatif": ("branch_whatif", str),     # atlas_ui/ui/branch.py, page/whatif.py
              # counted from 1, as the page shows them; read after `step` (0-based, links made before
              # step_no), so a link with both opens step_no's step
              "step_no": ("step", parse_count), "sentence_no": ("sentence_index", parse_count)}


def restore(key: str, default, valid) -> None:
    """Put the kept value back before the widget is drawn. Always through the Session State API:
    a widget whose identity changed (a slider's range, a selectbox's options: say, the step slider
    of a branch that is longer than the original) is a new widget to Streamlit, which would
    otherwise start it at its default and lose the step the user was on."""
    state = st.session_state
    value = state[key] if key in state else state.get(STORE + key, default)
    state[key] = value if valid(value) else default


def remember(key: str, value):
    st.session_state[STORE + key] = value
    return value


def put(key: str, value) -> None:
    """Set a widget's value; only from a callback or before the widget is drawn in this run."""
    st.session_state[key] = value
    st.session_state[STORE + key] = value


_MISSING = object()


def kept(key: str, default=None):
    """The last value of a widget, drawn in this run or not (a Session State read is not free:
    the kept copy is read only when the widget's own value is not there)."""
    state = st.session_state
    value = state.get(key, _MISSING)
    return state.get(STORE + key, default) if value is _MISSING else value


def _choice(widget, label: str, options, key: str, default=None, **kwargs):
    options = list(options)
    if default not in options:
        default = options[0]
    restore(key, default, lambda value: value in options)
    return remember(key, widget(label, options, key=key, **kwargs))


def selectbox(label, options, key, default=None, **kwargs):
    return _choice(st.selectbox, label, options, key, default, **kwargs)


def radio(label, options, key, default=None, **kwargs):
    return _choice(st.radio, label, options, key, default, **kwargs)


def toggle(label: str, key: str, default: bool = False, **kwargs) -> bool:
    restore(key, default, lambda value: isinstance(value, bool))
    return remember(key, st.toggle(label, key=key, **kwargs))


def int_slider(label: str, low: int, high: int, key: str, default: int, **kwargs) -> int:
    restore(key, min(max(default, low), high), lambda v: isinstance(v, int) and low <= v <= high)
    return remember(key, st.slider(label, low, high, key=key, **kwargs))


def text_area(label: str, key: str, default: str = "", **kwargs) -> str:
    restore(key, default, lambda value: isinstance(value, str))
    return remember(key, st.text_area(label, key=key, **kwargs) or "")


def text_input(label: str, key: str, default: str = "", **kwargs) -> str:
    restore(key, default, lambda value: isinstance(value, str))
    return remember(key, st.text_input(label, key=key, **kwargs) or "")


def multiselect(label: str, options, key: str, default: list, limit: int, **kwargs) -> list:
    options = list(options)
    default = [value for value in default if value in options][:limit]
    restore(key, default, lambda v: isinstance(v, list) and len(v) <= limit and all(x in options for x in v))
    return remember(key, st.multiselect(label, options, key=key, max_selections=limit, **kwargs))


def pills(label: str, options, key: str, default: list | None = None, **kwargs) -> list:
    """Multi-select pills (a row of toggles), kept like the other widgets."""
    options = list(options)
    restore(key, list(default or []), lambda v: isinstance(v, list) and all(x in options for x in v))
    return remember(key, list(st.pills(label, options, key=key, selection_mode="multi", **kwargs) or []))


def ablated_heads() -> list:
    """Every (kind, layer, head) ticked in the ablation view, drawn in this run or not, sorted."""
    heads = set()
    keys = [str(k) for k in st.session_state]           # one pass: each lists the whole state
    for key in set(keys) | {k[len(STORE):] for k in keys if k.startswith(STORE)}:
        if not key.startswith(ABLATE_PREFIX):
            continue
        kind, _, layer = key[len(ABLATE_PREFIX):].rpartition("_")
        value = kept(key, [])
        if kind and layer.isdigit() and isinstance(value, list):
            heads.update((kind, int(layer), int(h)) for h in value if isinstance(h, int))
    return sorted(heads)


def format_heads(heads) -> str:
    return ",".join(f"{kind}:{layer}:{head}" for kind, layer, head in heads)


def parse_heads(text: str) -> dict:
    """'cross:2:5,encoder_self:0:3' -> {session key: [heads]}; malformed parts are skipped."""
    keys: dict = {}
    for part in str(text).split(","):
        pieces = part.strip().split(":")
        if len(pieces) == 3 and pieces[1].isdigit() and pieces[2].isdigit():
            keys.setdefault(f"{ABLATE_PREFIX}{pieces[0]}_{int(pieces[1])}", []).append(int(pieces[2]))
    return {key: sorted(set(heads)) for key, heads in keys.items()}


def boot_from_url(extra_fields=()) -> None:
    """Once per session: seed the widgets from the URL's query parameters.
    extra_fields: (URL name, session key, parser) triples the views declare (View.url_fields)."""
    state = st.session_state
    if state.get(BOOTED):
        return
    state[BOOTED] = True
    seed(st.query_params.to_dict(), extra_fields)


def seed(params: dict, extra_fields=(), replace: bool = False, keep=("presenter",)) -> None:
    """Put a link's fields into the widgets' kept values. replace: first forget every value a link
    can hold (a room's follower takes the presenter's whole view: a field the presenter's link
    leaves out is back at its default), so the page then draws exactly that link; but not the session
    keys in `keep` (a follower's own presenter mode)."""
    state = st.session_state
    fields = {**URL_FIELDS, **{name: (key, parse) for name, key, parse in extra_fields}}
    if replace:
        present = {str(k) for k in state}          # one listing: a Session State access is not free
        keys = ({key for key, _ in fields.values()} | {"decoding"}) - set(keep)
        keys |= {k.removeprefix(STORE) for k in present if k.removeprefix(STORE).startswith(ABLATE_PREFIX)}
        for name in present & (keys | {STORE + key for key in keys}):
            del state[name]
        state[STORE + "decoding"] = "Greedy"
    for name, (key, parse) in fields.items():
        if name not in params or (replace and key in keep):
            continue
        try:
            value = parse(params[name])
        except (TypeError, ValueError):
            continue
        if key == "beam_size":
            state[STORE + "decoding"] = "Beam search" if value > 1 else "Greedy"
            if value <= 1:
                continue
        state[STORE + key] = value
    if "ablate" in params:
        for key, heads in parse_heads(params["ablate"]).items():
            state[STORE + key] = heads


def write_url(values: dict) -> None:
    """Mirror the current view in the URL (empty values are left out)."""
    params = {name: str(value) for name, value in values.items() if value not in (None, "")}
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
