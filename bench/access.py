"""How long one access decision takes on a gateway-sized tree: `policies.access.effective`.

    .venv/bin/python bench/access.py [--seed N] [--memories N] [--grants N] [--groups N] ...

Builds a forest of memories (default 100,000, at most 12 deep), scatters grants to members and groups,
puts every member in several groups, then times `effective` for random (member, memory) decisions,
each on its own with time.perf_counter_ns. Prints figures; never asserts. The target is a p99 of at
most 50 µs per decision.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections import Counter

from _tree import BenchTree, creator_grants, grow, people, percentile, scatter_grants

from policies.access import effective

TARGET_P99_US = 50.0


def pick(
    tree: BenchTree, rng: random.Random, who: frozenset[str], ids: list[str], near_grant: float
) -> tuple[frozenset[str], str]:
    """One decision to time: the member's principals and a memory, often one its grants reach."""
    if rng.random() < near_grant:
        held = [g for p in who for g in tree.grants_to(p)]
        if held:
            memory_id = rng.choice(held).memory_id
            for _ in range(rng.randint(0, 4)):
                children = tree.children_of(memory_id)
                if not children:
                    break
                memory_id = rng.choice(children)
            return who, memory_id
    return who, rng.choice(ids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--max-depth", type=int, default=12, help="deepest level below a root")
    parser.add_argument("--restricted", type=float, default=0.05, help="share of memories restricted")
    parser.add_argument("--grants", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--groups-per-member", type=int, nargs=2, default=(2, 8), metavar=("MIN", "MAX"))
    parser.add_argument("--creator-grants", action="store_true", help="add a creator's grant on every memory")
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument(
        "--near-grant",
        type=float,
        default=0.5,
        help="share of decisions asked at or a few levels below a memory the member holds a grant on "
        "(the rest pick any memory, and are nearly all refusals)",
    )
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    started = time.perf_counter()
    tree = BenchTree()
    ids, depth = grow(
        tree,
        rng,
        args.memories,
        under=None,
        base_depth=0,
        max_depth=args.max_depth,
        restricted_share=args.restricted,
        prefix="mem",
    )
    principals = people(rng, args.members, args.groups, tuple(args.groups_per_member))
    scatter_grants(tree, rng, ids, args.grants, members=args.members, groups=args.groups)
    if args.creator_grants:
        creator_grants(tree, rng, ids, args.members)
    build_s = time.perf_counter() - started

    members = list(principals)
    pairs = [
        pick(tree, rng, principals[rng.choice(members)], ids, args.near_grant) for _ in range(args.decisions)
    ]
    for who, memory_id in pairs[:2_000]:  # warm up
        effective(tree, who, memory_id)
    gc.collect()

    clock = time.perf_counter_ns
    overhead = []
    for _ in range(10_000):
        t0 = clock()
        overhead.append(clock() - t0)
    samples: list[int] = []
    by_outcome: dict[bool, list[int]] = {True: [], False: []}
    loop_cpu, loop_wall = time.thread_time_ns(), clock()
    for who, memory_id in pairs:
        t0 = clock()
        held = effective(tree, who, memory_id)
        t1 = clock()
        samples.append(t1 - t0)
        by_outcome[bool(held)].append(t1 - t0)
    loop_wall, loop_cpu = clock() - loop_wall, time.thread_time_ns() - loop_cpu
    samples.sort()
    overhead.sort()
    for values in by_outcome.values():
        values.sort()
    allowed = len(by_outcome[True])

    def us(ns: float) -> str:
        return f"{ns / 1000:9.2f}"

    roots = len(tree.roots())
    levels = Counter(depth.values())
    restricted = sum(tree.is_restricted(m) for m in ids)
    total_grants = args.grants + (len(ids) if args.creator_grants else 0)
    p99 = percentile(samples, 0.99) / 1000
    print("memfed bench: policies.access.effective, one decision per call")
    print(f"  python            {sys.version.split()[0]}")
    print(f"  seed              {args.seed}")
    print(
        f"  memories          {len(ids):,} in {roots} roots, max depth {max(levels)}, {restricted:,} restricted"
    )
    print("  depth histogram   " + " ".join(f"{d}:{levels[d]}" for d in sorted(levels)))
    creator = " incl. one creator grant per memory" if args.creator_grants else ""
    print(f"  grants            {total_grants:,}{creator}")
    print(
        f"  groups            {args.groups:,}; {len(members):,} members in {args.groups_per_member[0]}"
        f"-{args.groups_per_member[1]} groups each"
    )
    print(f"  build time        {build_s:.2f} s")
    print(
        f"  decisions         {len(samples):,} random (member, memory), {allowed / len(samples):.1%} allowed"
    )
    print(
        f"  clock overhead    {us(percentile(overhead, 0.5)).strip()} µs per perf_counter_ns pair (included)"
    )
    print(
        f"  timed loop        {loop_wall / 1e9:.2f} s wall, {loop_cpu / 1e9:.2f} s CPU"
        f" ({loop_cpu / loop_wall:.0%}; well below 100% means the machine was busy elsewhere)"
    )
    print()
    print("  latency (µs)          p50       p90       p99       max")
    rows = [("all decisions", samples), ("  allowed", by_outcome[True]), ("  refused", by_outcome[False])]
    for label, values in rows:
        if values:
            figures = [us(percentile(values, q)) for q in (0.5, 0.9, 0.99)] + [us(values[-1])]
            print(f"  {label:<14}" + " ".join(figures) + f"   n={len(values):,}")
    print()
    verdict = "met" if p99 <= TARGET_P99_US else "NOT met"
    print(f"  target            p99 <= {TARGET_P99_US:.0f} µs: {verdict} (p99 = {p99:.2f} µs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
