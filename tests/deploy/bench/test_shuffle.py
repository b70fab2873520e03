"""``shoal bench --model shuffle``'s comparison with the central libraries:
the better library per cell, its per-seed figures, and shuffle + refine over it."""

from shoal.deploy.bench.shuffle import _best_library, per_seed


def _rows(variant: str, values: list[float], name: str = "letter", n: int = 20_000, eps: float = 1.0,
          seeds: list[int] | None = None) -> list[dict]:
    """One run per value, of data seed 0, 1, ... unless ``seeds`` names them (a seed twice: two draws)."""
    return [{"dataset": name, "n": n, "eps": eps, "variant": variant, "normalized_objective": v, "seed": s}
            for v, s in zip(values, seeds or range(len(values)), strict=True)]


def test_the_better_library_is_the_lower_mean_and_the_ratio_is_shuffle_over_it():
    rows = _rows("google", [0.04, 0.06]) + _rows("diffprivlib", [0.06, 0.06])
    assert _best_library(rows, "letter", 20_000, 1.0, 0.055) == "google 0.05 (0.04 / 0.06) | 1.10 |"


def test_only_the_cell_s_own_rows_count():
    rows = (_rows("google", [0.05]) + _rows("google", [0.01], eps=4.0) + _rows("google", [0.01], n=5000)
            + _rows("diffprivlib", [0.01], name="uber"))
    assert _best_library(rows, "letter", 20_000, 1.0, 0.05) == "google 0.05 (0.05) | 1.00 |"


def test_a_cell_without_library_rows_leaves_both_columns_empty():
    assert _best_library(_rows("shuffle+refine", [0.05]), "letter", 20_000, 1.0, 0.05) == " | |"


def test_the_per_seed_figures_are_each_seeds_mean_over_its_draws():
    rows = _rows("google", [0.02, 0.04, 0.09], seeds=[1, 0, 1])  # seed 1 drawn twice
    assert per_seed(rows) == "0.04 / 0.055"
    assert _best_library(rows, "letter", 20_000, 1.0, 0.05) == "google 0.05 (0.04 / 0.055) | 1.00 |"
