"""Sentence indices, segment-shifted positions and segment encodings on hand-made windows."""

import torch

from ctxmt_cli.core.positions import PositionEncoding, current_sentence_mask, sentence_index, sinusoid, window_layout

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
    onehot = PositionEncoding(16, "onehot", 4)(pos, seg) - sinusoid(pos, 16)
    assert onehot[0, 0].tolist() == [0, 1] + [0] * 14 and onehot[0, 2, 0].item() == 1
    sin = PositionEncoding(16, "sinusoidal", 4)(pos, seg) - sinusoid(pos, 16)
    assert torch.allclose(sin, sinusoid(seg, 16))
    pse = PositionEncoding(16, "onehot", 4, d_se=4)(pos, seg)
    assert torch.equal(pse[..., :12], sinusoid(pos, 12)) and pse[0, 2, 12:].tolist() == [1, 0, 0, 0]


def test_unseen_longer_windows_reuse_last_segment_code():
    enc = PositionEncoding(8, "learned", 2)
    codes = enc.segment_codes(torch.tensor([[1, 2, 3, 7]]))
    assert torch.equal(codes[0, 2], codes[0, 1]) and torch.equal(codes[0, 3], codes[0, 1])
