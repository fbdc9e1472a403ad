"""Generate the demo's synthetic, learnable dataset: gaussian blobs in a few dimensions.

Writes ``<out>/train/data.csv`` and ``<out>/test/data.csv`` (a held-out split drawn from the same
distribution): one row per sample, ``label,f0,f1,...``. Deterministic for a given ``--seed``.
Standard library only, so it runs anywhere (no numpy, no torch).

    python examples/make_dataset.py --out /tmp/demo-data --train 4000 --test 1000
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path


def make_blobs(
    n: int, *, classes: int, features: int, spread: float, rng: random.Random
) -> list[list[float]]:
    centres_rng = random.Random(1234)  # the same centres for every split
    centres = [[centres_rng.uniform(-3.0, 3.0) for _ in range(features)] for _ in range(classes)]
    rows: list[list[float]] = []
    for i in range(n):
        label = i % classes
        rows.append([float(label), *(rng.gauss(c, spread) for c in centres[label])])
    rng.shuffle(rows)
    return rows


def write_split(path: Path, rows: list[list[float]], features: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["label", *(f"f{i}" for i in range(features))])
        for row in rows:
            writer.writerow([int(row[0]), *(f"{v:.5f}" for v in row[1:])])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory (gets train/ and test/)")
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--spread", type=float, default=1.6, help="std-dev of each blob (higher: harder)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    for split, n, seed in (("train", args.train, args.seed), ("test", args.test, args.seed + 1)):
        rows = make_blobs(
            n, classes=args.classes, features=args.features, spread=args.spread, rng=random.Random(seed)
        )
        write_split(out / split / "data.csv", rows, args.features)
    print(f"wrote {args.train} training and {args.test} test samples to {out}")


if __name__ == "__main__":
    main()
