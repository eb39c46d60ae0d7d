"""Sentence indices, segment-shifted positions and segment encodings on hand-made windows."""

import pytest
import torch

from ctxmt_cli.core.positions import PositionEncoding, current_sentence_mask, sentence_index, sinusoid, window_layout
from ctxmt_cli.models.concat.positions import SegmentPositionEncoding

BRK, EOS, BOS, PAD = 4, 3, 2, 0


def test_layout_on_hand_made_window():
    # a b <brk> c <brk> d e </s>   (3 sentences, oldest first)
    tokens = torch.tensor([[10, 11, BRK, 12, BRK, 13, 14, EOS]])
    positions, seg, n = window_layout(tokens, BRK, torch.tensor([10]))
    assert n.tolist() == [3]
    assert positions.tolist() == [[0, 1, 2, 13, 14, 25, 26, 27]]  # oldest unshifted, current shifted most
    assert seg.tolist() == [[3, 3, 3, 2, 2, 1, 1, 1]]             # k = 1 for the current sentence


def test_decoder_start_token_belongs_to_oldest_sentence():
    tgt_in = torch.tensor([[BOS, 10, BRK, 11, 12]])  # <s> ctx <brk> current...
    positions, seg, n = window_layout(tgt_in, BRK, torch.tensor([5]))
    assert seg[0, 0].item() == n.item() == 2
    assert positions.tolist() == [[0, 1, 2, 8, 9]]


def test_padding_keeps_layout_of_real_tokens():
    tokens = torch.tensor([[10, BRK, 11, EOS, PAD, PAD], [10, BRK, 11, 12, 13, EOS]])
    positions, seg, _ = window_layout(tokens, BRK, torch.tensor([3, 3]))
    assert positions[0, :4].tolist() == positions[1, :4].tolist()
    assert seg[0, :4].tolist() == [2, 2, 1, 1]


def test_current_mask_counts_final_eos_as_current():
    target = torch.tensor([[10, BRK, 11, 12, EOS, PAD]])
    assert current_sentence_mask(target, BRK).tolist() == [[False, False, True, True, True, True]]
    idx, n = sentence_index(target, BRK)
    assert idx.tolist() == [[0, 0, 1, 1, 1, 1]] and n.tolist() == [2]


def test_segment_encodings():
    pos = torch.tensor([[0, 1, 2]])
    seg = torch.tensor([[2, 2, 1]])
    plain = PositionEncoding(16)(pos, seg)
    assert torch.equal(plain, sinusoid(pos, 16))
    onehot = SegmentPositionEncoding(16, "onehot", 4)(pos, seg) - sinusoid(pos, 16)
    assert onehot[0, 0].tolist() == [0, 1] + [0] * 14 and onehot[0, 2, 0].item() == 1
    sin = SegmentPositionEncoding(16, "sinusoidal", 4)(pos, seg) - sinusoid(pos, 16)
    assert torch.allclose(sin, sinusoid(seg, 16))
    pse = SegmentPositionEncoding(16, "onehot", 4, d_se=4)(pos, seg)
    assert torch.equal(pse[..., :12], sinusoid(pos, 12)) and pse[0, 2, 12:].tolist() == [1, 0, 0, 0]


def test_unseen_longer_windows_reuse_last_segment_code():
    enc = SegmentPositionEncoding(8, "learned", 2)
    codes = enc.segment_codes(torch.tensor([[1, 2, 3, 7]]))
    assert torch.equal(codes[0, 2], codes[0, 1]) and torch.equal(codes[0, 3], codes[0, 1])


# ---- Lupo et al. 2023, §2.2: what persists ------------------------------------------------------
POS, SEG = torch.tensor([[0, 1, 2, 9, 10]]), torch.tensor([[2, 2, 2, 1, 1]])


@pytest.mark.parametrize("segment", ["onehot", "sinusoidal", "learned"])
def test_persistent_segment_embedding_persists_alone(segment):
    """Added segment embeddings, unshifted positions: only the segment embedding is re-added per layer."""
    enc = SegmentPositionEncoding(16, segment, 4, persistent=True)
    full = enc(POS, SEG)
    torch.testing.assert_close(enc.persisted(POS, SEG, full), full - sinusoid(POS, 16))
    torch.testing.assert_close(enc.persisted(POS, SEG, full), enc.segment_codes(SEG))


@pytest.mark.parametrize("kwargs", [
    {"segment": None},                                       # Table 9 "s4to4 + pers": the positions
    {"segment": None, "shifted": True},                      # shift + pers: the segment-shifted positions
    {"segment": "sinusoidal", "d_se": 4},                    # PSE: the whole vector
    {"segment": "learned", "d_se": 4},
    {"segment": "onehot", "shifted": True},                  # shifted positions and a segment embedding: both
])
def test_positions_persist_when_they_encode_sentence_position_or_form_pse(kwargs):
    enc = SegmentPositionEncoding(16, max_segments=4, persistent=True, **kwargs)
    full = enc(POS, SEG)
    assert enc.persisted(POS, SEG, full) is full


def test_nothing_persists_unless_asked():
    enc = SegmentPositionEncoding(16, "onehot", 4)
    assert enc.persisted(POS, SEG, enc(POS, SEG)) is None


# ---- the decoder's start token and the learned table (the authors' code) --------------------------
def test_decoder_start_token_takes_the_current_segment_but_keeps_position_0():
    tgt_in = torch.tensor([[BOS, 10, BRK, 11, 12]])                      # <s> ctx <brk> current...
    positions, seg, _ = window_layout(tgt_in, BRK, torch.tensor([5]))
    dec = SegmentPositionEncoding(16, "onehot", 4, decoder=True)
    enc = SegmentPositionEncoding(16, "onehot", 4)
    codes = (dec(positions, seg) - sinusoid(positions, 16)).round()        # (1, T, 16)
    assert codes[0, 0, :4].tolist() == [1, 0, 0, 0]                        # k = 1, the current sentence
    assert codes[0, 1, :4].tolist() == [0, 1, 0, 0]                        # context tokens keep k = 2
    assert torch.equal(codes[0, 0], codes[0, 3])
    source = (enc(positions, seg) - sinusoid(positions, 16)).round()      # the encoder side: as laid out
    assert source[0, 0, :4].tolist() == [0, 1, 0, 0]
    pse = SegmentPositionEncoding(16, "onehot", 4, d_se=4, decoder=True)(positions, seg)
    assert torch.equal(pse[0, 0, :12], sinusoid(torch.tensor(0), 12)) and pse[0, 0, 12:].tolist() == [1, 0, 0, 0]


def test_learned_table_is_standard_normal_and_can_be_shared():
    torch.manual_seed(0)
    table = SegmentPositionEncoding.learned_table(3, 512)
    w = table.weight[1:].detach()                                           # (3, 512) the rows in use
    assert abs(w.mean().item()) < 0.1 and abs(w.std().item() - 1.0) < 0.05
    enc = SegmentPositionEncoding(512, "learned", 3)
    dec = SegmentPositionEncoding(512, "learned", 3, decoder=True, table=enc.table)
    assert dec.table is enc.table


def test_marian_layout_is_hugging_face_marians_table():
    """``sinusoid: marian``: MarianSinusoidalPositionalEmbedding's table (pos / 10000^(2*(j//2)/d), sin of the even
    columns in the first half, cos of the odd ones in the second, no offset), here written out with numpy."""
    import numpy as np

    n, d = 40, 16
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / d) for j in range(d)] for pos in range(n)])
    want = torch.from_numpy(np.concatenate([np.sin(enc[:, 0::2]), np.cos(enc[:, 1::2])], axis=1)).float()
    table = PositionEncoding(d, "marian")
    torch.testing.assert_close(table.first(n, torch.device("cpu"))[0], want, atol=1e-6, rtol=0)
    torch.testing.assert_close(table(torch.arange(n)[None], None)[0], want, atol=1e-6, rtol=0)
    assert not torch.allclose(sinusoid(torch.arange(n), d), want, atol=1e-3)   # the default layout differs
