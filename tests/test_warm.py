"""atlas_ui/warm.py: what the process holds, weakly, so the page skips progress widgets only when
there is truly nothing to wait for."""
import gc

from atlas_ui.backend import translate
from atlas_ui.warm import hold, holds, model_key, translation_key


class Thing:
    pass


def test_held_objects_are_weak():
    thing = hold(("test", 1), Thing())
    assert holds(("test", 1))
    del thing
    gc.collect()
    assert not holds(("test", 1))                 # dropped by the caches -> progress shows again


def test_translation_keys_name_every_argument():
    base = translation_key("m", "cpu", "A dog.", 1, None)
    assert base == translation_key("m", "cpu", "A dog.", 1, None, (), False)
    variants = {translation_key("m", "cpu", "A cat.", 1, None), translation_key("m", "cpu", "A dog.", 4, None),
                translation_key("m", "cpu", "A dog.", 1, "Ein Hund."), translation_key("m", "cuda", "A dog.", 1, None),
                translation_key("m", "cpu", "A dog.", 1, None, (("cross", 0, 1),)),
                translation_key("m", "cpu", "A dog.", 1, None, (), True), translation_key("n", "cpu", "A dog.", 1, None)}
    assert base not in variants and len(variants) == 7


def test_a_translation_is_held_under_its_key_while_cached():
    from atlas_ui.backend import get_translator
    from atlas_ui.catalogue import ModelRef
    ref = ModelRef("pretrained/en-de")
    get_translator(ref, "cpu")
    assert holds(model_key(ref, "cpu"))
    result = translate(ref, "cpu", "A dog runs on the beach.", 1, None, 2)
    key = translation_key(ref, "cpu", "A dog runs on the beach.", 1, None)
    assert result.key == key and holds(key)
    assert not holds(translation_key(ref, "cpu", "A dog runs on the beach.", 1, None, (), True))


def test_the_share_link_cannot_be_reshaped_by_the_page_path():
    from urllib.parse import parse_qs, urlparse
    from atlas_ui.share import markdown_safe_url, share_url
    crafted = "http://host/x)[Sign in](https://evil.example/"
    url = markdown_safe_url(share_url(crafted, {"sentence": "A (big) [dog] <b>`x`</b>\nrun", "view": "Heatmap"}))
    assert not set("()[]<> `\n\\") & set(url)          # nothing that ends or starts a Markdown link
    assert parse_qs(urlparse(url).query)["sentence"] == ["A (big) [dog] <b>`x`</b>\nrun"]
