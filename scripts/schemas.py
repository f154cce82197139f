#!/usr/bin/env python3
"""Drafts docs/schemas/<kind>.schema.json from real documents of each kind.

    .venv/bin/python scripts/schemas.py DIR     # DIR holds <kind>.<n>.json samples

The draft (genson's inference over every sample of a kind: a key is required when
every sample has it, numbers are numbers or null, booleans booleans, strings
strings) is the starting point;
each kind's `schema` is pinned to its constant and `schema_version` to 1. Review
the diff before committing: the schemas are the contract, python/tests/test_schemas.py
validates every output against them.
"""

import json
import pathlib
import sys
from collections import defaultdict

from genson import SchemaBuilder

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def loosen(node):
    """Every number may be a fraction and may be null (docs/json.md: a figure that
    cannot be given is null): one sample's 0 or 20 says nothing more."""
    if isinstance(node, dict):
        t = node.get("type")
        if t == "null":
            # Only ever null in the samples (a state not reached, a figure not
            # given): what it holds otherwise is not known from them.
            del node["type"]
        elif t in ("integer", "number"):
            node["type"] = ["number", "null"]
        elif isinstance(t, list) and ("integer" in t or "number" in t):
            node["type"] = sorted({"number" if x == "integer" else x for x in t} | {"null"})
        elif t == "array" and str(node.get("items", {}).get("type", "")).find("number") >= 0 or (
            t == "array" and str(node.get("items", {}).get("type", "")).find("integer") >= 0
        ):
            # An interval [lo, hi] that cannot be given is null as well.
            node["type"] = ["array", "null"]
        for k, v in list(node.items()):
            if k != "required":
                loosen(v)
        if "anyOf" in node:
            kinds = [a for a in node["anyOf"] if set(a) == {"type"}]
            if len(kinds) == len(node["anyOf"]):
                merged = set()
                for a in kinds:
                    merged |= set(a["type"] if isinstance(a["type"], list) else [a["type"]])
                del node["anyOf"]
                node["type"] = sorted(merged)
    elif isinstance(node, list):
        for v in node:
            loosen(v)


def main(src: str) -> None:
    samples = defaultdict(list)
    for p in sorted(pathlib.Path(src).glob("*.json")):
        kind = p.name.split(".")[0]
        samples[kind].append(json.loads(p.read_text()))
    out = pathlib.Path(__file__).resolve().parents[1] / "docs" / "schemas"
    out.mkdir(parents=True, exist_ok=True)
    for kind, docs in samples.items():
        b = SchemaBuilder(schema_uri=DRAFT)
        for d in docs:
            b.add_object(d)
        s = b.to_schema()
        loosen(s)
        s["$id"] = f"https://quietwatt.dev/schemas/{kind}.schema.json"
        s["title"] = f"quietwatt.{kind}/1"
        props = s.setdefault("properties", {})
        if kind != "recording" or "schema" in props:
            props["schema"] = {"const": f"quietwatt.{kind}/1"}
            props["schema_version"] = {"const": 1}
            req = set(s.get("required", [])) | {"schema", "schema_version"}
            s["required"] = sorted(req)
        (out / f"{kind}.schema.json").write_text(json.dumps(s, indent=2) + "\n")
        print(f"{kind}: {len(docs)} sample(s)")


if __name__ == "__main__":
    main(sys.argv[1])
