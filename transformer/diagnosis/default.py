"""Generic diagnosis weights for models without their own MODEL_DIR/diagnosis.json: the mean of
the two shipped models' fitted weights (transformer/diagnosis/fit.py). Features are in nats and
standardised with the stored mean/std, so they carry over to other models roughly."""
DEFAULT = {
 "threshold": 0.5,
 "fitted_on": "mean of the shipped models' weights: Multi30k val pairs 300 onwards (300 pairs, never in the benchmark), seed 1: realistic in-sentence errors (omission, phrase, substitution, insertion; eflomal alignments) and the synthetic cases; words: non-negative logistic regressions, bias set so that 0.5 flags at most 6% of the unedited references; sentences: mean pmi weighted 6.5 and mean log p 3 more",
 "output": {
  "mean": [
   2.4260601940806064,
   -4.967192122721148,
   -3.4995974290261946,
   2.152781640149847
  ],
  "std": [
   3.5673644912243105,
   3.558197040091308,
   2.883564141071746,
   3.164184273411142
  ],
  "coef": [
   1.5822632543808695,
   0.6219004505230771,
   0.2893403585203106,
   0.7435712959975423
  ],
  "bias": -7.943535150093957,
  "features": [
   "neg_log_p",
   "neg_pmi",
   "neg_support",
   "neg_mean_log_p"
  ]
 },
 "source": {
  "mean": [
   -0.8486735055401476,
   0.28677123370790125,
   0.5423299551869629,
   -1.1851563608533158
  ],
  "std": [
   1.2489855575704099,
   0.23493520463910617,
   0.30285144321010726,
   0.6963650535670689
  ],
  "coef": [
   1.1696803119527828,
   0.7769704389043549,
   0.0,
   0.7009712730829654
  ],
  "bias": -5.091537876897447,
  "features": [
   "neg_drop",
   "unmet_max",
   "unmet_sum",
   "neg_drop_max"
  ]
 },
 "sentence": {
  "mean": [
   -3.7840787748307045,
   2.4846053982518264,
   -6.495221980965889,
   -0.06257642527800311,
   0.23828985541897887,
   0.8365415954744535,
   -1.1724594918156765,
   0.07010231234370567,
   0.4097181965559652,
   0.04494149809046985
  ],
  "std": [
   1.927370944973753,
   1.8958852453733952,
   2.8063693774668277,
   1.7739983195999356,
   0.2631592981201185,
   1.8673267298119218,
   1.6172286829115468,
   0.06374515312477542,
   0.3262296827411868,
   0.06975464896947126
  ],
  "coef": [
   -1.2311436163397087,
   -1.9772401899316014,
   -0.5228973675803597,
   -0.2622604345159404,
   0.6232282488573824,
   -1.207216371966175,
   -0.4852960992611496,
   -0.9711336474348033,
   1.4217817710710023,
   0.007906485946121894
  ],
  "bias": 2.4241265623720487,
  "features": [
   "mean_log_p",
   "mean_pmi",
   "min_log_p_window",
   "min_pmi_window",
   "low_pmi_share",
   "min_pmi_window4",
   "pmi_p10",
   "mean_hallucination",
   "max_hallucination",
   "flagged_share"
  ],
  "raw_coef": [
   -2.75,
   -5.75,
   0.0,
   0.0,
   0.0,
   0.0,
   0.0,
   0.0,
   0.0,
   0.0
  ]
 }
}
