"""SubsetSelection on the full domain (Wang et al. 2016; Ye & Barg 2018).

SS is MSS's one-block case m_0 = k, so it shares MSS's device randomiser,
wire format, counts, decoder and channel (:mod:`mss_protocol.mss`); only
its parameters differ: the SS-optimal subset size omega* on [k]
(:mod:`.subset_selection`).
"""
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.protocol import MssProtocol


class SubsetSelection(MssProtocol):
    min_k = 2  # one block, the modulus k
    min_k_why = ""
    searches_moduli = False

    def __init__(self, k, epsilon):
        super().__init__(MssConfig.subset_selection(k, epsilon))
