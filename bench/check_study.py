"""Check a study's output against its spec: every scenario's key exactly once, no other.

    .venv/bin/python -m bench.check_study examples/grid-500.yaml grid.csv

Exits 0 when the output holds exactly the spec's scenarios once each (after a kill and a
`--resume`, that is the claim to check), 1 otherwise; prints the counts and the statuses.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from api.cli import load_spec
from api.scenarios import scenario_request
from optimizer.studies import check_values, existing_rows, expand


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    spec = load_spec(args.spec)
    check_values(spec, scenario_request)
    expected = {scenario.key for scenario in expand(spec)}
    rows = existing_rows(args.out)
    keys = Counter(str(row["key"]) for row in rows)
    repeated = {key: n for key, n in keys.items() if n > 1}
    missing, extra = expected - set(keys), set(keys) - expected
    statuses = Counter(str(row["status"]) for row in rows)
    print(
        f"{args.out}: {len(rows)} rows, {len(keys)} distinct keys; spec: {len(expected)} scenarios"
    )
    print(f"missing {len(missing)}, repeated {len(repeated)}, not in the spec {len(extra)}")
    print("statuses: " + ", ".join(f"{n} {s}" for s, n in statuses.most_common()))
    return 0 if not (missing or repeated or extra) else 1


if __name__ == "__main__":
    sys.exit(main())
