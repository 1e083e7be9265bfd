"""A stream's two state machines (``aclasync._lanes``): only the written moves are legal.

The worker moves them on every loan and close; these checks are ``assert``s, so every
test of the suite runs them. Here: the table itself, and that an illegal move fails.
"""

from __future__ import annotations

import pytest

from aclasync._lanes import _MOVES, Lane, Life, Loan

LEGAL_LOANS = {
    (Loan.FREE, Loan.EVENT),
    (Loan.FREE, Loan.STREAM),
    (Loan.FREE, Loan.POLLED),
    (Loan.EVENT, Loan.FREE),
    (Loan.STREAM, Loan.FREE),
    (Loan.STREAM, Loan.HELD),
    (Loan.HELD, Loan.BACK),
    (Loan.BACK, Loan.FREE),
    (Loan.BACK, Loan.POLLED),
    (Loan.POLLED, Loan.FREE),
}
LEGAL_LIVES = {
    (Life.OPEN, Life.STOPPED),
    (Life.OPEN, Life.CLOSED),
    (Life.OPEN, Life.FORCED),
    (Life.STOPPED, Life.REFUSED),
    (Life.STOPPED, Life.CLOSED),
    (Life.STOPPED, Life.FORCED),
    (Life.REFUSED, Life.CLOSED),
    (Life.REFUSED, Life.FORCED),
}


def _lane_in(state: Life | Loan) -> Lane:
    """A lane brought to *state* by legal moves only."""
    lane = Lane(0x10)
    paths = {
        Loan.EVENT: [Loan.EVENT],
        Loan.STREAM: [Loan.STREAM],
        Loan.HELD: [Loan.STREAM, Loan.HELD],
        Loan.BACK: [Loan.STREAM, Loan.HELD, Loan.BACK],
        Loan.POLLED: [Loan.POLLED],
        Life.STOPPED: [Life.STOPPED],
        Life.REFUSED: [Life.STOPPED, Life.REFUSED],
        Life.CLOSED: [Life.CLOSED],
        Life.FORCED: [Life.FORCED],
    }
    for step in paths.get(state, []):
        lane.move(step)
    return lane


@pytest.mark.parametrize("start", [*Loan, *Life], ids=lambda s: s.name)
def test_every_move_is_legal_exactly_when_the_table_says(start: Life | Loan) -> None:
    kind = type(start)
    legal = LEGAL_LOANS if kind is Loan else LEGAL_LIVES
    assert {(start, to) for to in _MOVES[start]} == {p for p in legal if p[0] is start}
    for to in kind:
        lane = _lane_in(start)
        if (start, to) in legal:
            lane.move(to)
            assert (lane.loan if kind is Loan else lane.life) is to
        else:
            with pytest.raises(AssertionError, match=f"no move to {to.name}"):
                lane.move(to)


def test_a_lane_starts_open_and_free_and_takes_back_a_held_loan() -> None:
    lane = Lane(0x20, flags=2)
    assert (lane.life, lane.loan, lane.fast_sync) == (Life.OPEN, Loan.FREE, True)
    lane.move(Loan.STREAM)
    lane.move(Loan.HELD)
    lane.move(Loan.BACK)
    lane.take_back()
    assert lane.loan is Loan.FREE
    lane.move(Life.FORCED)
    assert lane.closed
    assert lane.life is Life.FORCED
