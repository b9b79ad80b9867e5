"""Generic diagnosis weights for models without their own MODEL_DIR/diagnosis.json: the mean of
the two shipped models' fitted weights (transformer/diagnosis_fit.py). Features are in nats and
standardised with the stored mean/std, so they carry over to other models roughly."""
DEFAULT = {
 "threshold": 0.5,
 "fitted_on": "mean of: pieces and source words: Multi30k train, 1500 random pairs (seed 1); sentences: val pairs 300 onwards (never in the benchmark), mean pmi weighted 6.5 and mean log p 3.5 more; synthetic labels of the protocol; pieces and source words: Multi30k train, 1500 random pairs (seed 1); sentences: val pairs 300 onwards (never in the benchmark), mean pmi weighted 1.5 and mean log p 1 more; synthetic labels of the protocol",
 "piece": {
  "mean": [
   -2.8547311473403765,
   3.4162007275980244,
   -2.9232711881634383,
   3.4966411655249034,
   3.4162007275981225,
   -2.854731147340269
  ],
  "std": [
   3.711646180247251,
   3.9065077747387513,
   2.5705830816476034,
   2.7099033074952246,
   2.0385868712164665,
   2.0066429180324983
  ],
  "coef": [
   -0.8708059056374576,
   -0.28331558648394356,
   -1.5750386721741678,
   -2.376389329367604,
   -0.3612035118470714,
   -2.709459965810895
  ],
  "bias": -1.8783797242002298,
  "features": [
   "log_p",
   "pmi",
   "log_p_window",
   "pmi_window",
   "sentence_pmi",
   "sentence_log_p"
  ]
 },
 "source": {
  "mean": [
   0.6781611867991068,
   2.350416246397671,
   0.15179688109800638,
   0.6411634696562277,
   0.1986903762031803,
   3.598347961904711
  ],
  "std": [
   1.2577994358693327,
   2.6367938327000484,
   0.30959263737714704,
   0.9301374735786068,
   0.4222474784382887,
   2.040407960823249
  ],
  "coef": [
   -0.9381733633458299,
   -1.7864537677252101,
   0.1295705365012197,
   -1.1946764861947088,
   1.374025905128787,
   -1.1207576877859546
  ],
  "bias": -1.6110335077560307,
  "features": [
   "drop",
   "drop_max",
   "drop_mean",
   "drop_window",
   "drop_share",
   "sentence_pmi"
  ]
 },
 "sentence": {
  "mean": [
   -3.7712674918160474,
   2.5246903253102824,
   -6.497198306582725,
   -0.05065620445289525,
   0.23581951536897056,
   0.8758719834276567,
   -1.1576603779769323,
   0.5792034812349525,
   0.7627041336773807,
   0.5842837350679146
  ],
  "std": [
   1.8954975190838006,
   1.8701392050792034,
   2.760334573379065,
   1.739034351804599,
   0.2592951301117722,
   1.8577916670987809,
   1.5965139272818711,
   0.39344225176268655,
   0.39627098250751047,
   0.4045456956353143
  ],
  "coef": [
   0.7599165401671819,
   -0.6497735795958707,
   -0.6493592838596076,
   -0.42741824352550517,
   0.4850893579414244,
   -1.1570048083670827,
   -0.5869518179662172,
   0.6380842196698286,
   0.3689902379486006,
   1.362701539280937
  ],
  "bias": 2.0005348757726447,
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
   -2.25,
   -4.0,
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
