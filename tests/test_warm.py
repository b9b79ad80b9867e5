"""atlas_ui/runs/warm.py: what the process holds, weakly, so the page skips progress widgets only when
there is truly nothing to wait for."""
import gc
from pathlib import Path

from atlas_ui.runs.translation import translate
from atlas_ui.runs.warm import RunKey, hold, holds, model_key


class Thing:
    pass


def test_held_objects_are_weak():
    thing = hold(("test", 1), Thing())
    assert holds(("test", 1))
    del thing
    gc.collect()
    assert not holds(("test", 1))                 # dropped by the caches -> progress shows again


def test_run_keys_name_every_field_and_are_made_once():
    base = RunKey("m", "cpu", "A dog.", 1)
    assert base.digest == RunKey("m", "cpu", "A dog.", 1, None, (), False, "translation").digest
    variants = {RunKey("m", "cpu", "A cat.", 1).digest, RunKey("m", "cpu", "A dog.", 4).digest,
                RunKey("m", "cpu", "A dog.", 1, "Ein Hund.").digest, RunKey("m", "cuda", "A dog.", 1).digest,
                RunKey("m", "cpu", "A dog.", 1, None, (("cross", 0, 1),)).digest,
                RunKey("m", "cpu", "A dog.", 1, None, (), True).digest, RunKey("n", "cpu", "A dog.", 1).digest,
                RunKey("m", "cpu", "A dog.", 1, ("\u2581Ein",)).digest,
                RunKey("m", "cpu", "A dog.", 1, ("\u2581Ein",), kind="branch").digest,
                RunKey("m", "cpu", "A dog.", 1, kind="lens").digest}
    assert base.digest not in variants and len(variants) == 10
    # a related run is `but()` of the page's key: the same digest as the key built from scratch
    assert base.but(text="A cat.", explain=True).digest == RunKey("m", "cpu", "A cat.", 1, explain=True).digest
    assert base.but(beam_size=4) == RunKey("m", "cpu", "A dog.", 4) and base.but() == base
    assert base.digest is base.digest              # worked out once per key, then read


def test_a_cached_run_is_built_once_held_under_its_key_and_takes_only_its_own_kind():
    """warm.cached_run, the one way a run is cached: a key of another kind is refused; the first call
    builds, holds the result under key.digest and hands out the same object after; an equal key
    built from scratch gets it without building; what the build raises passes through uncached."""
    import pytest
    from atlas_ui.runs.warm import cached_run, held

    builds = []

    @cached_run("test_echo", max_entries=4)
    def echo(key, slots):
        builds.append(key)
        if key.text == "bad":
            raise ValueError("no")
        return Thing()

    echo.clear()
    key = RunKey("m", "cpu", "A dog.", 1, kind="test_echo")
    with pytest.raises(TypeError):
        echo(key.but(kind="translation"), 2)
    first = echo(key, 2)
    assert held().get(key.digest) is first and echo(RunKey("m", "cpu", "A dog.", 1, kind="test_echo"), 2) is first
    assert len(builds) == 1 and echo.kind == "test_echo"
    for _ in range(2):
        with pytest.raises(ValueError):
            echo(key.but(text="bad"), 2)
    assert len(builds) == 3 and not holds(key.but(text="bad").digest)
    echo.clear()


def test_every_cached_run_has_a_kind_of_its_own():
    """Each run module's cached runs (warm.cached_run) name a kind no other run uses: two runs of one
    kind would hand out each other's results under one key."""
    import importlib
    import pkgutil
    import atlas_ui.runs
    runs = [value for info in pkgutil.iter_modules(atlas_ui.runs.__path__)
            for value in vars(importlib.import_module(f"atlas_ui.runs.{info.name}")).values()
            if callable(value) and isinstance(getattr(value, "kind", None), str) and hasattr(value, "__wrapped__")]
    kinds = {}
    for run in runs:
        kinds.setdefault(run.kind, set()).add(run.__wrapped__)
    assert {"translation", "explained", "branch", "attribution", "lens", "decoder_lens", "alignment", "patch",
            "diagnosis"} <= set(kinds)
    assert all(len(builds) == 1 for builds in kinds.values()), kinds


def test_a_translation_is_held_under_its_key_while_cached():
    from atlas_ui.runs.translation import get_translator
    from atlas_ui.runs.catalogue import ModelRef
    ref = ModelRef("pretrained/en-de")
    get_translator(ref, "cpu")
    assert holds(model_key(ref, "cpu"))
    run = RunKey(ref, "cpu", "A dog runs on the beach.", 1)
    result = translate(run, 2)
    assert result.key == run.digest and holds(run.digest)
    assert translate(RunKey(ref, "cpu", "A dog runs on the beach.", 1), 2) is result    # an equal key, the same run
    assert not holds(run.but(explain=True).digest)


def test_a_branch_is_held_under_the_key_derived_from_the_page_s_run():
    """The page names its run once (page/translation.page_run); the what-if branch it shows is
    translate_prefix of branch_key(that run, prefix), held under that key's digest and keyed by it: one
    key in one place, so an equal key (a view's, a later rerun's) gets the same Result, not a second
    decoding."""
    from atlas_ui.page.whatif import branch_run
    from atlas_ui.page.translation import page_run
    from atlas_ui.runs.branch import branch_key, translate_prefix
    from atlas_ui.runs.catalogue import ModelRef
    from atlas_ui.runs.warm import held
    ref, text = ModelRef("pretrained/en-de"), "A dog runs on the beach."
    run = page_run(ref, "cpu", text, "", 1)
    original = translate(run, 2)
    prefix = (original.output_tokens[0], original.steps[1][2][1][0])      # the second choice at step 2
    branch = branch_run(run, prefix)                                        # what the page shows
    key = branch_key(run, prefix)
    assert key == RunKey(ref, "cpu", text, 1, prefix, kind="branch")
    assert branch.key == key.digest and held().get(key.digest) is branch
    assert translate_prefix(RunKey(ref, "cpu", text, 1, prefix, kind="branch"), 2) is branch
    assert tuple(branch.output_tokens[:2]) == prefix and branch.output_tokens != original.output_tokens
    assert not holds(key.but(explain=True).digest) and key.digest != run.digest


def test_a_branch_and_a_run_forced_through_the_same_pieces_are_held_apart():
    """A branch's key is the run's of kind "branch" with the prefix as its target; the run forced
    through exactly those pieces is a translation with the same target. Their kinds keep them apart:
    each gets its own Result (and figures: Result.key), and neither hands out the other. Fails when
    the kind is left out of the key (one digest for both: the forced run would be the branch)."""
    from atlas_ui.runs.branch import branch_key, translate_prefix
    from atlas_ui.runs.catalogue import ModelRef
    from atlas_ui.runs.warm import held
    text = "A dog runs on the beach."
    run = RunKey(ModelRef("pretrained/en-de"), "cpu", text, 1)
    original = translate(run, 2)
    prefix = (original.output_tokens[0], original.steps[1][2][1][0])      # the second choice at step 2
    key = branch_key(run, prefix)
    forced_key = run.but(target=prefix)
    assert forced_key.target == key.target and forced_key.digest != key.digest
    branch = translate_prefix(key, 2)
    forced = translate(forced_key, 2)
    assert forced is not branch and forced.key != branch.key
    assert tuple(forced.output_tokens) == prefix and forced.forced
    assert tuple(branch.output_tokens[:2]) == prefix and len(branch.output_tokens) > 2 and not branch.forced
    assert held().get(key.digest) is branch and held().get(forced_key.digest) is forced
    assert translate_prefix(key, 2) is branch and translate(forced_key, 2) is forced


def test_the_lens_and_alignment_views_hold_their_runs_under_keys_derived_from_the_page_s_run(translator, monkeypatch):
    """Logit lens and Head roles read the page's run (page/translation.page_run as page/main calls it, recorded here as the page
    makes it): the lens, the DecoderLens rows and the alignment they draw are held under the digest of
    lens_key / decoder_lens_key / alignment_key of that run, and an equal key built from scratch (a
    rerun's, another session's) gets the same run, not a second pass. Opened on a what-if branch, so
    the derived keys carry the branch's pieces. Fails when a view holds its run under a key built
    another way (from loose arguments, another beam, the reference)."""
    from streamlit.testing.v1 import AppTest
    from test_app import APP, check_clean, opened_on_a_branch
    from atlas_ui.page import main
    from atlas_ui.runs.alignment import AlignmentRun, alignment_key, alignment_run
    from atlas_ui.runs.lens import DecoderLensRun, LensRun, decoder_lens_key, decoder_lens_run, lens_key, lens_run
    from atlas_ui.runs.warm import held
    made, page_run = [], main.page_run
    monkeypatch.setattr(main, "page_run", lambda *args, **kwargs: made.append(page_run(*args, **kwargs)) or made[-1])
    text = "A dog runs on the beach."

    def opened(view="Logit lens", **params):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update({"model": "en-de", "view": view, "sentence": text, **params})
        at.run()
        check_clean(at, view)
        return at

    _, _, prefix, branch = opened_on_a_branch(translator, text, opened)
    run, pieces, prefix = made[-1], tuple(branch.output_tokens), tuple(prefix)
    assert run.text == text and run.target is None and not run.head_mask
    lens = held().get(lens_key(run, pieces).digest)
    assert isinstance(lens, LensRun) and lens.key == lens_key(run, pieces).digest and lens.output_tokens == pieces
    assert lens_run(RunKey(run.model, run.device, text, 1, pieces, kind="lens"), 2) is lens
    decoder = held().get(decoder_lens_key(run, prefix).digest)
    assert isinstance(decoder, DecoderLensRun) and all(row[1][:2] == prefix for row in decoder.rows)
    scratch = RunKey(run.model, run.device, text, run.beam_size, prefix, kind="decoder_lens")
    assert decoder_lens_run(scratch, 2) is decoder
    opened("Head roles", branch=" ".join(prefix))
    assert made[-1] == run
    alignment = held().get(alignment_key(run, pieces).digest)
    assert isinstance(alignment, AlignmentRun) and alignment.output_tokens == pieces
    assert alignment_run(RunKey(run.model, run.device, text, 1, pieces, kind="alignment"), 2) is alignment
    assert len({lens.key, decoder.key, alignment.key, run.digest}) == 4


def test_the_attribution_is_held_under_the_key_derived_from_the_page_s_run(translator, monkeypatch):
    """The Attribution view reads the page's run (page/translation.page_run as page/main calls it, recorded here as the page makes
    it): what it draws is held under the digest of explain.attribution_key(that run, pieces), and
    attribution() of an equal key built from scratch (a rerun's, another session's) gets the same
    numbers, not a second perturbation test. On a what-if branch the key is forced through the
    branch's pieces (beam 1); with a reference and beam 4 asked, it is the page's forced run (beam 1,
    the reference). Fails when the view holds the attribution under a key built another way (the beam
    asked for, explain=True as the page's run has it, the plain digest of the run)."""
    from streamlit.testing.v1 import AppTest
    from test_app import APP, check_clean, opened_on_a_branch
    from atlas_ui.page import main
    from atlas_ui.runs.explain import Attribution, attribution, attribution_key
    from atlas_ui.runs.warm import held
    made, page_run = [], main.page_run
    monkeypatch.setattr(main, "page_run", lambda *args, **kwargs: made.append(page_run(*args, **kwargs)) or made[-1])
    text, reference = "A dog runs on the beach.", "Ein Hund läuft am Strand."

    def opened(**params):
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params.update({"model": "en-de", "view": "Attribution", "sentence": text, "step": "1", **params})
        at.run()
        check_clean(at, "Attribution")
        return at

    _, _, _, branch = opened_on_a_branch(translator, text, opened)
    run, pieces = made[-1], tuple(branch.output_tokens)
    assert run.text == text and run.target is None and run.explain           # the view needs the explained run
    key = attribution_key(run, pieces)
    assert key == RunKey(run.model, run.device, text, 1, pieces, kind="attribution")
    drawn = held().get(key.digest)
    assert isinstance(drawn, Attribution) and tuple(drawn["output_tokens"]) == pieces
    assert attribution(RunKey(run.model, run.device, text, 1, pieces, kind="attribution"), 2) is drawn
    assert held().get(key.but(kind="translation").digest) is not drawn
    assert held().get(run.but(kind="attribution").digest) is None

    opened(ref=reference, beam="4")
    run = made[-1]
    assert run.target == reference and run.beam_size == 1 and run.explain
    key = attribution_key(run)
    assert key == RunKey(run.model, run.device, text, 1, reference, kind="attribution")
    forced = held().get(key.digest)
    assert isinstance(forced, Attribution) and forced is not drawn
    assert attribution(RunKey(run.model, run.device, text, 1, reference, kind="attribution"), 2) is forced
    assert held().get(key.but(beam_size=4).digest) is None


def test_the_share_link_cannot_be_reshaped_by_the_page_path():
    from urllib.parse import parse_qs, urlparse
    from atlas_ui.page.share import markdown_safe_url, share_url
    crafted = "http://host/x)[Sign in](https://evil.example/"
    url = markdown_safe_url(share_url(crafted, {"sentence": "A (big) [dog] <b>`x`</b>\nrun", "view": "Heatmap"}))
    assert not set("()[]<> `\n\\") & set(url)          # nothing that ends or starts a Markdown link
    assert parse_qs(urlparse(url).query)["sentence"] == ["A (big) [dog] <b>`x`</b>\nrun"]


def test_a_shared_figure_sends_the_json_plotly_makes_for_it():
    """What st.plotly_chart does with a figure (to a dict, then to JSON) gives plotly's own JSON for
    a shared figure, made once; a presenter copy leaves the shared one as it was."""
    import numpy as np
    import plotly.graph_objects as go
    import plotly.io
    import plotly.tools

    from atlas_ui.ui.figures import FigureCache, SharedFigure
    from viz import overview_figure, presenter_figure

    weights = np.random.default_rng(0).random((2, 3, 4, 5)).astype(np.float32)         # (L, H, Q, K)
    make = lambda: overview_figure(weights, list("abcd"), ["<s>", "x", "y", "z", "</s>"], "t",  # noqa: E731
                                   kind_label="Cross", marked=[(1, 2)])
    expected = plotly.io.to_json(make(), validate=False)
    shared = FigureCache(4).get(("overview",), make)
    assert isinstance(shared, SharedFigure) and isinstance(shared, go.Figure)
    as_streamlit_does = plotly.tools.return_figure_from_figure_or_data(shared, validate_figure=True)
    assert plotly.io.to_json(as_streamlit_does, validate=False) == expected
    assert plotly.io.to_json(shared, validate=False) == expected
    big = presenter_figure(shared)
    assert type(big) is go.Figure and big.layout.font.size == 18
    assert shared.layout.font.size is None and plotly.io.to_json(shared, validate=False) == expected
    assert plotly.io.to_json(shared.to_dict(), pretty=True) != expected       # other options: plotly's own answer


def test_phones_share_one_refit_copy_of_a_shared_figure():
    """An audience's phones on one link: the phone copy of a shared figure is made once (and its
    JSON with it); the shared figure stays as it was; a figure nobody shares gets its own copy."""
    import numpy as np
    import plotly.graph_objects as go
    import plotly.io

    from atlas_ui.ui.figures import FigureCache, SharedFigure, shared_version
    from viz import attention_heatmap, phone_figure

    made = []
    make = lambda fig: made.append(1) or phone_figure(fig)                    # noqa: E731
    build = lambda: attention_heatmap(np.full((4, 5), 0.2), list("abcd"), list("vwxyz"), "t")  # noqa: E731
    shared = FigureCache(4).get(("heatmap",), build)
    before = plotly.io.to_json(shared, validate=False)
    first, again = shared_version(shared, "phone", make), shared_version(shared, "phone", make)
    assert first is again and len(made) == 1 and isinstance(first, SharedFigure)
    assert first.data[0].showscale is False and shared.data[0].showscale is not False
    assert plotly.io.to_json(shared, validate=False) == before
    assert plotly.io.to_json(first, validate=False) == plotly.io.to_json(phone_figure(shared), validate=False)
    plain = build()
    assert shared_version(plain, "phone", make) is not shared_version(plain, "phone", make) and len(made) == 3
    assert type(shared_version(plain, "phone", make)) is go.Figure


def test_a_rooms_followers_share_one_slide_of_a_shared_figure():
    """Presenter mode (a room's followers): the slide of a shared figure is refit once per slide
    height, equal to the slide made for it alone; the shared figure stays as it was."""
    import numpy as np
    import plotly.io

    from atlas_ui.ui.common import slide
    from atlas_ui.ui.figures import FigureCache, SharedFigure, shared_version
    from functools import partial
    from viz import attention_heatmap

    made = []
    build = lambda: attention_heatmap(np.full((6, 7), 0.1), list("abcdef"), list("tuvwxyz"), "t")  # noqa: E731
    shared = FigureCache(4).get(("heatmap",), build)
    before = plotly.io.to_json(shared, validate=False)
    make = lambda height: lambda fig: made.append(height) or slide(fig, max_height=height)       # noqa: E731
    first, again = shared_version(shared, ("slide", 480), make(480)), shared_version(shared, ("slide", 480), make(480))
    assert first is again and made == [480] and isinstance(first, SharedFigure)
    other = shared_version(shared, ("slide", 440), make(440))
    assert other is not first and made == [480, 440]
    assert first.layout.font.size == 18 and first.layout.height >= 470
    assert plotly.io.to_json(first, validate=False) == plotly.io.to_json(slide(build(), max_height=480), validate=False)
    assert plotly.io.to_json(shared, validate=False) == before
    plain = build()
    assert shared_version(plain, ("slide", 480), partial(slide, max_height=480)) is not \
        shared_version(plain, ("slide", 480), partial(slide, max_height=480))


def test_a_crowd_asking_for_one_figure_builds_it_once():
    import threading

    import plotly.graph_objects as go

    from atlas_ui.ui.figures import FigureCache

    cache, builds, start = FigureCache(4), [], threading.Barrier(8)

    def build():
        builds.append(1)
        return go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))

    got = []

    def session():
        start.wait()
        got.append(cache.get(("run", "view"), build))

    threads = [threading.Thread(target=session) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(got) == 8 and all(figure is got[0] for figure in got)


def test_head_statistics_are_worked_out_once_per_translation():
    from atlas_ui.runs.translation import get_translator
    from atlas_ui.runs.catalogue import ModelRef
    from atlas_ui.runs.result import kind_statistics
    ref = ModelRef("pretrained/en-de")
    get_translator(ref, "cpu")
    result = translate(RunKey(ref, "cpu", "A dog runs on the beach.", 1), 2)
    assert translate(RunKey(ref, "cpu", "A dog runs on the beach.", 1), 2) is result     # what the process holds
    first = kind_statistics(result)
    assert kind_statistics(result) is first and set(first) == {"encoder_self", "decoder_self", "cross"}
