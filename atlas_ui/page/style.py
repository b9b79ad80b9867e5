"""The page's own CSS (constants only: no user text) and its title line."""
from __future__ import annotations

# Constants only (no user text). The picture first: less padding and smaller gaps above the chart,
# the page's title in the header's band (the sidebar that holds the other one starts folded), and
# the view picker on one line (smaller labels; no radio circles: the view open is bold, underlined).
# Streamlit pulls a markdown element up by 1rem to cancel its last paragraph's margin; our HTML
# blocks (the translation strip, the source strip, the what-if table) end in a div, which has none,
# so without the last rule their last line ran under the next element.
# On a phone the view's first chart comes before its controls (a shared link shows its picture first).
# The input row's buttons keep their words (a narrow main area with the sidebar open, the presenter's
# popover): the sentence box gives up the room.
# A view's controls sit label beside field; in a view 641-1000 px wide (the sidebar open at 1280 px)
# each label goes above its field, which then has the column's whole width ("Cross-attenti"), and a
# toggle's words wrap (narrower, on a phone, the columns stack and each has the whole width).
# A follower's room poller (page/room.py) is a script, not a sight: its element takes no room in the bar.
COMPACT_CSS = """<style>
[data-testid='stMainBlockContainer']{padding-top:0.3rem;padding-bottom:2rem}
[data-testid='stHeader']{background:transparent;pointer-events:none}
[data-testid='stHeader'] button,[data-testid='stHeader'] a{pointer-events:auto}
.aa-title{font-size:1.05rem;line-height:2.1rem;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.aa-title span{opacity:0.6;font-size:0.9rem}
@media (max-width:640px){.aa-title{padding-left:2.4rem}.aa-title span{display:none}}
[data-testid='stMain'] [data-testid='stVerticalBlock']{gap:0.4rem}
.st-key-view_body .stSelectbox,.st-key-view_body .stRadio{display:flex;flex-direction:row;align-items:center;gap:0.45rem}
.st-key-view_body .stSelectbox > [data-testid='stWidgetLabel'],.st-key-view_body .stRadio > [data-testid='stWidgetLabel']{flex:0 0 auto;width:auto;margin-bottom:0}
.st-key-view_body .stSelectbox > div:not([data-testid='stWidgetLabel']){flex:1 1 auto;min-width:0}
.st-key-view_body [data-testid='stRadioOption'] p{white-space:nowrap}
.st-key-view_body{container-type:inline-size}
@container (min-width:641px) and (max-width:1000px){.st-key-view_body .stSelectbox{flex-direction:column;align-items:stretch;gap:0}
.st-key-view_body .stSelectbox > [data-testid='stWidgetLabel']{margin-bottom:0.25rem}
.st-key-view_body .stCheckbox [data-testid='stWidgetLabel'] p{white-space:normal}}
@media (max-width:640px){.st-key-view_body > :nth-child(1 of :has([data-testid='stPlotlyChart'])){order:-1}}
.st-key-view [role='radiogroup']{gap:0.1rem 0.75rem;flex-wrap:wrap}
[data-testid='stColumn']:has(.st-key-translate),[data-testid='stColumn']:has(.st-key-inputs_open){min-width:max-content}
[data-testid='stPopoverBody']:has(.st-key-translate){width:min(46rem,92vw)}
.st-key-view label p{font-size:0.84rem;border-bottom:2px solid transparent}
.st-key-view [data-testid='stRadioOption'] > div > div:first-child{display:none}
.st-key-view [data-testid='stRadioOption'][data-selected='true'] p{font-weight:600;border-bottom-color:currentColor}
.st-key-translation [data-testid='stText']{font-size:1.05rem}
.st-key-step [data-testid='stSliderThumbValue'],.st-key-step [data-testid='stSliderTickBarMin'],
.st-key-step [data-testid='stSliderTickBarMax']{display:none}
[data-testid='stMarkdownContainer']:has(> div:last-child){margin-bottom:0}
.st-key-room_poller{display:none}
</style>"""
# On a phone a chart's x axis is a third of a 1280 px window's: a sentence's pieces stood upright a
# few px apart, text on text (issue 31, runs/shots15.py). There every k-th label stays, at most
# PHONE_X_LABELS of them an axis (like presenter mode's fit_ticks); a tap on a cell still names its piece.
PHONE_X_LABELS = 10


# Charts whose every x label must stay (the word alignment: a link is read from the words at its ends).
EVERY_X_LABEL = ("roles_alignment",)


def phone_tick_css(most: int = PHONE_X_LABELS, widest_step: int = 10) -> str:
    """CSS rules hiding all but every k-th x tick label of an axis with more than most*(k-1) of them
    (the labels are g.xtick; the tick marks beside them are path.xtick), except in EVERY_X_LABEL's
    containers."""
    rules = []
    keep = "".join(f":not(.st-key-{key} *)" for key in EVERY_X_LABEL)
    for k in range(2, widest_step + 1):
        axis = f".xaxislayer-above{keep}:has(> g.xtick:nth-child({most * (k - 1) + 1} of g.xtick))"
        if k < widest_step:
            axis += f":not(:has(> g.xtick:nth-child({most * k + 1} of g.xtick)))"
        rules.append(f"{axis} > g.xtick:not(:nth-child({k}n+1 of g.xtick)) text{{display:none}}")
    return "@media (max-width:640px){" + "".join(rules) + "}"


# A phone's own charts are refit for it (viz.phone_figure thins their labels, the same ones in each
# tile of a grid): the rules above would hide every other label of those again. They are for a
# desktop window made narrow, and for presenter mode on a phone (slides are built for 1280 px).
COMPACT_CSS_PHONE = COMPACT_CSS
COMPACT_CSS = COMPACT_CSS.replace("</style>", phone_tick_css() + "</style>")     # one element: no extra gap


def compact_css(phone_fitted: bool) -> str:
    """The page's CSS (a constant): without the tick-label rules where every chart is phone-fitted."""
    return COMPACT_CSS_PHONE if phone_fitted else COMPACT_CSS


PAGE_TITLE = ("<div class='aa-title'><b>Attention Atlas</b><span> · every head, every layer, every decoding step "
              "of an encoder–decoder Transformer</span></div>")
