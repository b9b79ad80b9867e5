"""ALTI+ as its authors define it (Ferrando et al. 2022; reference code mt-upc/transformer-
contributions-nmt, wrappers/transformer_wrapper.py), reimplemented here straight from the
formula and from what the real model's modules saw in one forced pass (forward hooks), not
through transformer/explain/alti.py's re-run:

    c_ij = max(0, ‖y_i‖₁ - ‖y_i - T_i(x_j)‖₁) / Σ_j,  y_i the whole resultant, biases included
    (pre-LN: Σ_j T_i(x_j) + b_O; post-LN: LN made linear: Σ_j T_i(x_j) + l(b_O)/σ_i + β),

then the authors' rollout (encoder; decoder over [cross · encoder rollout | residual · self]).
The models have random biases and norm gains/βs, which is where conventions differ. One
deliberate difference from the authors' code: σ_i = sqrt(var(z_i) + eps) exactly (theirs takes
the unbiased std of z_i + eps), and distances are exact (F.pairwise_distance adds 1e-6).
"""
import numpy as np
import pytest
import torch

from transformer import Translator
from transformer.capture import capture
from transformer.config import ModelConfig
from transformer.model import Transformer

SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street."
HF_NAMES = ("marian", "bart", "nllb", "mbart50")            # post-LN, post-LN, pre-LN, pre-LN


def _layers(tr):
    """Per attention layer (in forward order): kind, layer, attention module, its block's norm,
    and the names of its v / output projections."""
    if tr.engine.family == "ours":
        m, rows = tr.engine.model, []
        for i, l in enumerate(m.encoder_layers):
            rows.append(("encoder_self", i, l.self_attention, l.attention_block.norm))
        for i, l in enumerate(m.decoder_layers):
            rows += [("decoder_self", i, l.self_attention, l.self_attention_block.norm),
                     ("cross", i, l.cross_attention, l.cross_attention_block.norm)]
        return rows, "v_proj", "out_proj"
    enc, dec, rows = tr.engine.model.get_encoder(), tr.engine.model.get_decoder(), []
    for i, l in enumerate(enc.layers):
        rows.append(("encoder_self", i, l.self_attn, l.self_attn_layer_norm))
    for i, l in enumerate(dec.layers):
        rows += [("decoder_self", i, l.self_attn, l.self_attn_layer_norm),
                 ("cross", i, l.encoder_attn, l.encoder_attn_layer_norm)]
    return rows, "v_proj", "out_proj"


@torch.no_grad()
def _record(tr, source_ids, fed_ids):
    """One forced pass of the real model: per attention layer its query input, key/value input,
    norm input, and the attention weights it computed (H, Tq, Tk)."""
    rows, _, _ = _layers(tr)
    seen, handles = {}, []

    def on_attention(key, module, args, kwargs, output):
        q_in = kwargs.get("hidden_states", args[0] if args else None)
        kv = kwargs.get("key_value_states", args[1] if len(args) > 1 else None)
        seen[key + ("q",)] = q_in[0]
        seen[key + ("kv",)] = (q_in if kv is None else kv)[0]

    def on_norm(key, module, args):
        seen[key + ("ln",)] = args[0][0]

    for kind, layer, attention, norm in rows:
        key = (kind, layer)
        handles.append(attention.register_forward_hook(
            lambda m, a, k, o, key=key: on_attention(key, m, a, k, o), with_kwargs=True))
        handles.append(norm.register_forward_pre_hook(lambda m, a, key=key: on_norm(key, m, a)))
    src, fed = torch.tensor([source_ids], device=tr.device), torch.tensor([fed_ids], device=tr.device)
    try:
        with capture() as recorder:
            if tr.engine.family != "ours":
                tr.engine.model(input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=fed)
            else:
                tr.engine.model(src, None, fed)
    finally:
        for h in handles:
            h.remove()
    return [dict(kind=kind, layer=layer, attention=attention, norm=norm, q=seen[(kind, layer, "q")],
                 kv=seen[(kind, layer, "kv")], ln=seen[(kind, layer, "ln")],
                 alpha=recorder.records[(kind, layer)][0][0]) for kind, layer, attention, norm in rows]


@torch.no_grad()
def _authors_layer(r, pre_ln: bool, with_biases: bool = True) -> torch.Tensor:
    """One layer's contributions (Tq, Tk'), the authors' way, in float64."""
    d = torch.float64
    alpha, att, norm = r["alpha"].to(d), r["attention"], r["norm"]
    on = alpha.device                                       # the model's device (ATLAS_TEST_DEVICE)
    H, Tq, Tk = alpha.shape
    v = (r["kv"].to(d) @ att.v_proj.weight.to(d).T + att.v_proj.bias.to(d)).view(Tk, H, -1).transpose(0, 1)
    w_o = att.out_proj.weight.to(d).T.reshape(H, -1, att.out_proj.weight.shape[0])    # (H, dh, D)
    b_o = att.out_proj.bias.to(d)
    moved = torch.einsum("hqk,hke,hef->qkf", alpha, v, w_o)                          # (Tq, Tk, D)
    residual = (r["ln"] if pre_ln else r["q"]).to(d)                                 # (Tq, D)
    if r["kind"] == "cross":
        out_qv = torch.cat([moved, residual[:, None]], dim=1)
    else:
        out_qv = moved + torch.einsum("qk,qd->qkd", torch.eye(Tq, dtype=d, device=on), residual)
    if pre_ln:
        transformed, resultant = out_qv, out_qv.sum(1) + b_o * with_biases
    else:
        D = b_o.shape[0]
        ln_in = r["ln"].to(d)
        std = (ln_in.var(-1, unbiased=False) + norm.eps).sqrt()[:, None, None]       # (Tq, 1, 1)
        centre = torch.eye(D, dtype=d, device=on) - torch.full((D, D), 1.0 / D, dtype=d, device=on)
        l_transform = lambda x: x @ centre @ torch.diag(norm.weight.to(d))           # noqa: E731
        transformed = l_transform(out_qv) / std
        resultant = transformed.sum(1)
        if with_biases:
            resultant = resultant + (l_transform(b_o) / std)[:, 0] + norm.bias.to(d)
    contributions = -(transformed - resultant[:, None]).abs().sum(-1)               # -‖y - T(x_j)‖₁
    c = (contributions + resultant.abs().sum(-1, keepdim=True)).clamp(min=0)        # "min_sum"
    return c / c.sum(-1, keepdim=True)


def authors_alti(records, pre_ln: bool, with_biases: bool = True):
    """(encoder rollout (S, S), total rollout (T, S + T)) as get_contribution_rollout computes."""
    c = {}
    for r in records:
        c.setdefault(r["kind"], []).append(_authors_layer(r, pre_ln, with_biases))
    enc = c["encoder_self"][0]
    for layer in c["encoder_self"][1:]:
        enc = layer @ enc
    cross, self_dec = torch.stack(c["cross"]), torch.stack(c["decoder_self"])       # (L, T, S+1), (L, T, T)
    S = cross.shape[2] - 1
    joint = torch.cat([cross[:, :, :S], self_dec * cross[:, :, -1:]], dim=-1)         # (L, T, S + T)
    rolled = torch.cat([joint[:, :, :S] @ enc, joint[:, :, S:]], dim=-1)
    total = rolled[0]
    for layer in rolled[1:]:
        step = torch.cat([layer[:, S:] @ total[:, :S] + layer[:, :S], layer[:, S:] @ total[:, S:]], dim=-1)
        total = step / step.sum(-1, keepdim=True)
    return enc, total


def _compare(tr, pre_ln: bool):
    """Max abs difference of explain=True's ALTI+ from the authors' formula, and from the same
    formula with the biases left out (the convention this replaced)."""
    out = tr.translate(SENTENCE, max_len=10, explain=True)
    ex = out.explanation
    fed = tr.engine.tokenizer.piece_ids(out.target_tokens)
    records = _record(tr, out.source_ids, fed)
    ours = np.concatenate([ex.source_contribution, ex.prefix_contribution], axis=1)
    enc, total = (t.cpu().numpy() for t in authors_alti(records, pre_ln))
    _, no_bias = authors_alti(records, pre_ln, with_biases=False)
    assert ex.logits_check <= 1e-4
    return (float(np.abs(ours - total).max()), float(np.abs(ex.encoder_contribution - enc).max()),
            float(np.abs(ours - no_bias.cpu().numpy()).max()))


def test_shipped_en_de_matches_the_authors_definition(en_de):
    assert en_de.config.norm_first
    total, enc, no_bias = _compare(en_de, pre_ln=True)
    assert total <= 1e-4 and enc <= 1e-4, (total, enc)
    assert no_bias >= 5e-4, no_bias          # the test can tell the conventions apart on this model


def test_our_post_ln_model_with_random_biases_and_gains(en_de):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=en_de.config.vocab_size, d_model=32, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=2, d_ff=64, dropout=0.0, norm_first=False)
    model = Transformer(cfg)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                torch.nn.init.normal_(module.weight, mean=1.0, std=0.3)
            if isinstance(module, (torch.nn.LayerNorm, torch.nn.Linear)) and module.bias is not None:
                torch.nn.init.normal_(module.bias, std=0.3)
    tr = Translator(model, en_de.engine.tokenizer, device="cpu")
    total, enc, no_bias = _compare(tr, pre_ln=False)
    assert total <= 1e-4 and enc <= 1e-4, (total, enc)
    assert no_bias >= 1e-3, no_bias


@pytest.fixture(scope="module")
def hf_random(hf_dirs, tmp_path_factory):
    """Tiny HF models (copies of the shared ones, biases and norm parameters randomised, loaded back)."""
    from hf_tiny import LANGUAGES, randomise_biases
    root = tmp_path_factory.mktemp("alti_reference")
    loaded = {}
    for name in HF_NAMES:
        source, target = LANGUAGES.get(name, (None, None))
        folder = randomise_biases(hf_dirs.copy(name, root / name), seed=len(loaded))
        loaded[name] = Translator.load(folder, device="cpu", source_lang=source, target_lang=target)
    return loaded


@pytest.mark.parametrize("name", HF_NAMES)
def test_hugging_face_families_match_the_authors_definition(hf_random, name):
    tr = hf_random[name]
    assert tr.config.norm_first == (name in ("nllb", "mbart50"))
    biases = [m.bias for m in tr.engine.model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert min(float(b.detach().abs().max()) for b in biases) > 0.1          # really not the defaults
    total, enc, no_bias = _compare(tr, pre_ln=tr.config.norm_first)
    assert total <= 1e-4 and enc <= 1e-4, (name, total, enc)
    assert no_bias >= 1e-3, (name, no_bias)
