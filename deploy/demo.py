"""``make demo``: one private round on data the project generates, in-process.

Runs the built-in 2-D "city" pickups (k=6) and seed 004's Gaussian mixture
(d=100, k=8) through every device's encoder and the server's decoder and
prints the centers and an accuracy table. Needs nothing outside the repo.
"""

from __future__ import annotations

from typing import Any

from shoal.common.kinds.encoder_rule import Encoder
from shoal.deploy.bench.results import machine
from shoal.deploy.simulation.datasets import city_locations, paper_mixture
from shoal.deploy.simulation.progress import bar, say
from shoal.deploy.simulation.simulate import simulate


def main() -> None:
    print(f"shoal demo on {machine()}", flush=True)
    runs: list[tuple[Encoder, float]] = [("lsh", 2.0), ("lsh", 8.0), ("nettree", 2.0), ("nettree", 8.0)]
    progress = bar(1 + len(runs), "demo rounds")
    city = city_locations(200_000, seed=0)
    r = simulate(city.points, city.k, 4.0, "auto", bound=city.bound, seed=0)
    progress.update()
    say(f"\ncity pickups: n={r['n']} d=2 k={city.k} eps=4 encoder=auto -> {r['encoder']} (box 0..100 km)")
    say("private centers (km):")
    for c in r["centers"]:
        say(f"  ({c[0]:6.2f}, {c[1]:6.2f})")
    say(f"verdict: {r['quality']['verdict']}")
    say("\n| dataset | n | encoder | eps | objective | non-private | one center | ratio to one center | encode s | decode s |")
    say("|---|---|---|---|---|---|---|---|---|---|")
    _row("city", f"auto -> {r['encoder']}", 4.0, r)
    mix = paper_mixture(300_000, seed=0)
    for enc, eps in runs:
        _row("paper mixture d=100 k=8", enc, eps, simulate(mix.points, 8, eps, enc, seed=0))
        progress.update()
    progress.close()
    print("\nobjectives are k-means cost / n in the unit-ball scale (seed 004, Sec. 5)")


def _row(name: str, enc: str, eps: float, res: dict[str, Any]) -> None:
    """One table row, printed as soon as its round is decoded."""
    say(f"| {name} | {res['n']} | {enc} | {eps:g} | {res['normalized_objective']:.4f} | "
        f"{res['nonprivate_objective']:.4f} | {res['trivial_objective']:.4f} | "
        f"{res['normalized_objective'] / res['trivial_objective']:.3f} | "
        f"{res['encode_seconds']:.1f} | {res['decode_seconds']:.1f} |")


if __name__ == "__main__":
    main()
