#!/usr/bin/env python3
"""tests/cpp/publish/avro_check.py: decodes `dblog publish --format debezium-avro` records with
Apache Avro's own Python library (Debian's python3-avro) and compares each with the
JsonConverter payload (schemas.enable=true) of the same event. Input: one JSON document
{"schemas": {"<id>": "<Avro schema as the registry received it>"}, "records": [{"subject": s,
"frame": base64 of the Confluent wire bytes, "expected": <JsonConverter payload>}]}. Each frame
must start with the magic byte 0 and a 4-byte big-endian id the registry assigned under that
subject, and its body must decode, to its last byte, with that writer schema into the expected
value: base64 bytes as bytes, Decimal as decimal.Decimal of the schema's scale, NaN and the
infinities as floats, Debezium's unavailable-value placeholder as its bytes in a bytes field
a one-element array in a text array field, its bytes as numbers in an int array
(Debezium's UnchangedToastedPlaceholder). Prints "<n> records" and exits 0, else the first
difference and exits 1. With --decode first: checks the frames the same way and prints each
decoded value as one JSON line (bytes base64, decimals as text) instead of comparing. Used by
avro_test.cc and kafka_test.cc.
"""
import base64
import decimal
import io
import json
import math
import sys

import avro.io
import avro.schema

PLACEHOLDER = "__debezium_unavailable_value"


def expected(schema, value, path):
    t = schema.type
    if t == "union":
        if value is None:
            if not any(s.type == "null" for s in schema.schemas):
                raise ValueError(f"{path}: null in a union without null")
            return None
        branches = [s for s in schema.schemas if s.type != "null"]
        return expected(branches[0], value, path)
    if value is None:
        raise ValueError(f"{path}: null for a required {t}")
    if t == "record":
        if set(value) - {f.name for f in schema.fields}:
            raise ValueError(f"{path}: members the schema lacks: {set(value) - {f.name for f in schema.fields}}")
        return {f.name: expected(f.type, value.get(f.name), f"{path}.{f.name}") for f in schema.fields}
    if t == "array":
        if value == PLACEHOLDER:  # Debezium's UnchangedToastedPlaceholder
            items = [s for s in getattr(schema.items, "schemas", [schema.items]) if s.type != "null"][0]
            if items.type in ("int", "long"):
                return [b - 256 if b > 127 else b for b in PLACEHOLDER.encode()]
            return [PLACEHOLDER]
        return [expected(schema.items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if t == "bytes":
        raw = value.encode() if value == PLACEHOLDER else base64.b64decode(value, validate=True)
        if schema.get_prop("logicalType") == "decimal":
            unscaled = int.from_bytes(raw, "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-int(schema.get_prop("scale")))
        return raw
    if t in ("float", "double"):
        return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(value, value))
    return value


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) == type(b) and a == b


def plain(value):
    """A decoded value as JSON: bytes as base64, decimals as their text."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def main():
    decode_only = sys.argv[1] == "--decode"
    doc = json.load(open(sys.argv[-1]))
    schemas = {int(k): avro.schema.parse(v) for k, v in doc["schemas"].items()}
    subjects = doc.get("subjects", {})
    for n, record in enumerate(doc["records"]):
        frame = base64.b64decode(record["frame"])
        where = f"record {n} ({record['subject']})"
        if len(frame) < 5 or frame[0] != 0:
            print(f"{where}: no magic byte 0")
            return 1
        schema_id = int.from_bytes(frame[1:5], "big")
        if schema_id not in schemas:
            print(f"{where}: schema id {schema_id} was never assigned")
            return 1
        if subjects and schema_id not in subjects.get(record["subject"], []):
            print(f"{where}: schema id {schema_id} was not registered under {record['subject']}")
            return 1
        body = io.BytesIO(frame[5:])
        decoded = avro.io.DatumReader(schemas[schema_id]).read(avro.io.BinaryDecoder(body))
        if body.tell() != len(frame) - 5:
            print(f"{where}: {len(frame) - 5 - body.tell()} bytes left after the value")
            return 1
        if decode_only:
            print(json.dumps(plain(decoded), separators=(",", ":")))
            continue
        want = expected(schemas[schema_id], record["expected"], "")
        if not same(decoded, want):
            print(f"{where}: decoded\n{decoded!r}\nexpected\n{want!r}")
            return 1
    if not decode_only:
        print(f"{len(doc['records'])} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
