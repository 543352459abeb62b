"""Reads schemathesis's NDJSON report: the share of tested operations that answered a 2xx at least once.

Usage: coverage.py REPORT.ndjson MINIMUM   (MINIMUM a fraction, e.g. 0.80). Exits 1 below it, and
lists the operations that never reached a 2xx either way: they are where seeding or the document
falls short.
"""

import json
import sys


def main():
    path, minimum = sys.argv[1], float(sys.argv[2])
    tested, reached = set(), set()
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished["recorder"]
            interactions = recorder.get("interactions") or {}
            if not interactions:
                continue
            label = recorder["label"]
            tested.add(label)
            for interaction in interactions.values():
                response = interaction.get("response") or {}
                method = (interaction.get("request") or {}).get("method", "")
                # unsupported_method sends other methods under this label: only the operation's own count.
                if 200 <= response.get("status_code", 0) < 300 and label.startswith(method.upper() + " "):
                    reached.add(label)
                    break
    if not tested:
        sys.exit("conformance: the report lists no tested operation")
    share = len(reached) / len(tested)
    print(f"conformance: {len(reached)} of {len(tested)} tested operations answered a 2xx ({share:.0%}; "
          f"at least {minimum:.0%} needed)")
    for label in sorted(tested - reached):
        print(f"  never 2xx: {label}")
    if share < minimum:
        sys.exit(1)


if __name__ == "__main__":
    main()
