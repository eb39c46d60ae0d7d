"""Translation in sentence groups (ctxmt_cli/decode/groups.py) for a model that declares it (mbe)."""

from __future__ import annotations

import pytest
import torch

from ctxmt_cli.config import validate_recipe
from ctxmt_cli.core.batch import VocabInfo
from ctxmt_cli.decode.groups import document_groups, group_hypotheses
from ctxmt_cli.decode.search import beam_search
from ctxmt_cli.errors import CtxmtError
from ctxmt_cli.models.families import build_model, inputs_of

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = VocabInfo(src_size=40, tgt_size=40)
DOCS = [[[5, 6, 7], [8, 9], [10, 11, 12, 13], [14, 15]], [[16, 17, 18]], [[19, 20], [21, 22, 23], [24]]]


def test_document_groups():
    lengths = [3, 1, 4, 2, 5]
    assert document_groups(lengths, None, "consecutive") == [[0, 1, 2, 3, 4]]
    assert document_groups(lengths, 2, "consecutive") == [[0, 1], [2, 3], [4]]
    assert document_groups(lengths, 2, "length") == [[1, 3], [0, 2], [4]]
    with pytest.raises(CtxmtError, match="group_order"):
        document_groups(lengths, 2, "random")
    with pytest.raises(CtxmtError, match="group_sentences"):
        document_groups(lengths, 0, "consecutive")


def model(placement: str):
    torch.manual_seed(0)
    spec = {"family": "mbe", "preset": None, "d_model": 32, "ffn_dim": 64, "heads": 4, "encoder_layers": 1,
            "decoder_layers": 1, "dropout": 0.0, "placement": placement}
    net = build_model(validate_recipe({"model": spec}).model, VOCAB).eval()
    with torch.no_grad():                                                   # peaked, varied outputs
        for p in net.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    return net


def run(net, docs, **options):
    def search(batch, limit):
        return beam_search(net, batch, beam=2, lenpen=0.6, max_len=limit, banned=[4])

    found = group_hypotheses(search, docs, VOCAB, max_len=lambda n: n + 4, inputs=inputs_of(net.cfg), **options)
    return [[hyp.tokens for hyp in doc] for doc in found]


@pytest.mark.parametrize("placement", ["encoder", "decoder"])
def test_outputs_do_not_depend_on_packing_but_on_the_group(placement):
    net = model(placement)
    together = run(net, DOCS)
    assert together == [run(net, [doc])[0] for doc in DOCS]                 # documents decoded apart
    assert together == run(net, DOCS, max_sentences=1)                      # one group per beam search
    assert [len(d) for d in together] == [len(d) for d in DOCS]
    singles = run(net, DOCS, group_sentences=1)
    assert singles == [[run(net, [[s]])[0][0] for s in doc] for doc in DOCS]
    assert singles != together                                              # the group is what the model reads
