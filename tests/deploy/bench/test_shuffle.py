"""``shoal bench --model shuffle``'s comparison with the central libraries:
the better library per cell, its per-seed figures, and shuffle + refine over it."""

from shoal.deploy.bench.shuffle import _best_library


def _rows(variant: str, values: list[float], name: str = "letter", n: int = 20_000, eps: float = 1.0) -> list[dict]:
    return [{"dataset": name, "n": n, "eps": eps, "variant": variant, "normalized_objective": v} for v in values]


def test_the_better_library_is_the_lower_mean_and_the_ratio_is_shuffle_over_it():
    rows = _rows("google", [0.04, 0.06]) + _rows("diffprivlib", [0.06, 0.06])
    assert _best_library(rows, "letter", 20_000, 1.0, 0.055) == "google 0.05 (0.04 / 0.06) | 1.10 |"


def test_only_the_cell_s_own_rows_count():
    rows = (_rows("google", [0.05]) + _rows("google", [0.01], eps=4.0) + _rows("google", [0.01], n=5000)
            + _rows("diffprivlib", [0.01], name="uber"))
    assert _best_library(rows, "letter", 20_000, 1.0, 0.05) == "google 0.05 (0.05) | 1.00 |"


def test_a_cell_without_library_rows_leaves_both_columns_empty():
    assert _best_library(_rows("shuffle+refine", [0.05]), "letter", 20_000, 1.0, 0.05) == " | |"
