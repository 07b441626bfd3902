"""The data and initial weights of the DDP-in-practice parity runs (ddp_unused.py, ddp_join.py),
written out as formulas that tests/parity/ddp_practice_driver.cpp repeats in C++: every value is a
multiple of 1/8 or 1/16, exact in float32, so both sides start from the same bits."""
IN = 3  # features per row
ROWS = 4  # rows per batch
STEPS = 6
LR = 0.1

INITIAL = {
    "a.weight": [0.25, -0.5, 0.125], "a.bias": [0.0625],
    "b.weight": [-0.25, 0.375, 0.5], "b.bias": [-0.125],
    "c.weight": [0.5, 0.25, -0.375], "c.bias": [0.25],
}


def initial(name):
    return INITIAL[name]


def batch(step, rank):
    """Rank `rank`'s batch at `step`: ROWS x IN inputs (row-major) and ROWS targets."""
    x = [((step * 7 + rank * 5 + i * 3 + j * 2) % 11 - 5) / 8
         for i in range(ROWS) for j in range(IN)]
    y = [((step + rank * 3 + i) % 5 - 2) / 4 for i in range(ROWS)]
    return x, y


def heads(step, rank):
    """The heads the forward uses: a always; b when step + rank is odd; c when step % 3 == 0."""
    return "a" + ("b" if (step + rank) % 2 == 1 else "") + ("c" if step % 3 == 0 else "")
