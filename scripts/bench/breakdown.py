#!/usr/bin/env python3
"""Where the samples of a `perf record --call-graph dwarf` profile go, one frame at a time.

    perf script -F ip,sym,dso -i perf.data > stacks.txt
    scripts/bench/breakdown.py stacks.txt 'handle_post::{{closure}}' 'invoke_tool'

First the share of all samples by where the innermost frame ran (the kernel, libc, the
program). Then, for
each FRAME (a substring of a symbol), the share of all samples whose stack holds it, and
how those samples split between the functions it calls directly (its outermost
occurrence counts, so recursion is not counted twice). Used by scripts/profile.sh.
"""
import collections
import re
import sys

FRAME_LINE = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)$")


def stacks(path):
    """Each sample's frames as (symbol, object), innermost first."""
    with open(path, errors="replace") as f:
        for block in f.read().split("\n\n"):
            frames = [(m.group(1), m.group(2)) for m in map(FRAME_LINE.match, block.splitlines()) if m]
            if frames:
                yield frames


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    samples = list(stacks(sys.argv[1]))
    if not samples:
        sys.exit(f"{sys.argv[1]}: no samples with call stacks (was it recorded with --call-graph dwarf?)")
    total = len(samples)
    share = lambda n: f"{100.0 * n / total:5.1f} %"
    print(f"{total} samples")
    objects = collections.Counter(frames[0][1].rsplit("/", 1)[-1] for frames in samples)
    for name, n in objects.most_common(5):
        print(f"    {share(n)}  {name}")
    for target in sys.argv[2:]:
        callees = collections.Counter()
        hits = 0
        for frames in samples:
            positions = [i for i, (name, _) in enumerate(frames) if target in name]
            if not positions:
                continue
            hits += 1
            outermost = positions[-1]
            callees[frames[outermost - 1][0] if outermost > 0 else "(its own code)"] += 1
        print(f"\n{share(hits)}  {target}")
        for name, n in callees.most_common(12):
            print(f"    {share(n)}  {name[:110]}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into head
        pass
