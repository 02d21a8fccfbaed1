"""How the ONNX runtime groups texts into forward passes: by length, so little is padding."""

from __future__ import annotations

from memsvc.embeddings.onnx import lanes_of, length_chunks


def padded_tokens(lengths: list[int], chunks: list[list[int]]) -> int:
    return sum(len(chunk) * lengths[chunk[0]] for chunk in chunks)


def test_every_text_is_in_exactly_one_pass_longest_first() -> None:
    lengths = [12, 102, 4, 30, 33, 98, 12, 50, 7, 40]
    chunks = length_chunks(lengths, batch_size=64)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(lengths)))
    widths = [lengths[chunk[0]] for chunk in chunks]
    assert widths == sorted(widths, reverse=True)
    assert all(lengths[chunk[0]] == max(lengths[i] for i in chunk) for chunk in chunks)


def test_no_text_fills_less_than_the_minimum_share_of_its_pass() -> None:
    lengths = [12, 102, 4, 30, 33, 98, 12, 50, 7, 40, 101, 5, 5, 5]
    chunks = length_chunks(lengths, batch_size=64, min_fill=0.8)
    assert all(lengths[i] >= 0.8 * lengths[chunk[0]] for chunk in chunks for i in chunk)
    # One pass over all of them would pad to 102 tokens each: three times the real tokens.
    assert padded_tokens(lengths, chunks) <= 1.25 * sum(lengths) < 102 * len(lengths) / 2


def test_similar_lengths_share_a_pass_up_to_the_batch_size() -> None:
    assert length_chunks([10] * 5, batch_size=64) == [[0, 1, 2, 3, 4]]
    assert length_chunks([10] * 5, batch_size=2) == [[0, 1], [2, 3], [4]]
    assert length_chunks([10, 9, 8], batch_size=64, min_fill=0.8) == [[0, 1, 2]]
    assert length_chunks([], batch_size=64) == []


def test_lanes_share_the_passes_and_hold_every_text_once() -> None:
    lengths = [40] * 64 + [12] * 30 + [5] * 3
    passes = length_chunks(lengths, batch_size=64)
    lanes = lanes_of(passes, lengths, 2)
    assert len(lanes) == 2
    held = sorted(i for lane in lanes for chunk in lane for i in chunk)
    assert held == list(range(len(lengths)))
    work = [sum(len(c) * lengths[c[0]] for c in lane) for lane in lanes]
    assert max(work) <= 1.5 * min(work), work  # the 64 long texts were halved, not left on one lane
    # Each pass is still padded to its own first (longest) text.
    assert all(lengths[c[0]] == max(lengths[i] for i in c) for lane in lanes for c in lane)


def test_a_single_query_or_a_small_pass_stays_on_one_lane() -> None:
    assert lanes_of(length_chunks([9], batch_size=64), [9], 2) == [[[0]]]
    small = [7] * 5  # halves of fewer than four texts cost more than the second core saves
    assert lanes_of(length_chunks(small, batch_size=64), small, 2) == [[[0, 1, 2, 3, 4]]]
    assert len(lanes_of(length_chunks([7] * 8, batch_size=64), [7] * 8, 2)) == 2
