#!/usr/bin/env python3
"""tests/cpp/publish/connect_json_check.py: reads a file of JSON documents, one per line, each
as Kafka Connect's JsonConverter with schemas.enable=true reads a record's key or value
({"schema": ..., "payload": ...}), and checks each the way JsonConverter turns it into Connect
data (org.apache.kafka.connect.json.JsonConverter: asConnectSchema, then convertToConnect),
more strictly where JsonConverter is lenient: an integer must be an integer in its type's
range, a boolean a boolean, bytes base64 text, a struct an object whose every member the schema
names. Lines starting with "value " are record values (their schema must be Debezium's envelope,
a struct named "....Envelope", as the Debezium JDBC sink recognizes one); "key " lines are
keys. A line "null" is a tombstone. Exit status 0 and "N records" when all pass; 1 and the first
violation otherwise. No Java here (Kafka's jars cannot be fetched on this machine), so these are
JsonConverter's rules, written from its source, not JsonConverter itself.
"""
import base64
import binascii
import json
import sys

RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
NON_NUMERIC = {"NaN", "Infinity", "-Infinity"}  # Jackson's QUOTE_NON_NUMERIC_NUMBERS


class Violation(Exception):
    pass


def schema_of(node, path):
    """JsonConverter.asConnectSchema: the schema's own shape."""
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise Violation(f"{path}: a schema is an object with a string 'type'")
    t = node["type"]
    if t not in ("boolean", "int8", "int16", "int32", "int64", "float", "double", "bytes",
                 "string", "array", "map", "struct"):
        raise Violation(f"{path}: unknown schema type {t!r}")
    if "optional" in node and not isinstance(node["optional"], bool):
        raise Violation(f"{path}: 'optional' must be a boolean")
    if "version" in node and not isinstance(node["version"], int):
        raise Violation(f"{path}: 'version' must be an integer")
    params = node.get("parameters", {})
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise Violation(f"{path}: 'parameters' must map names to strings")
    if node.get("name") == "org.apache.kafka.connect.data.Decimal" and "scale" not in params:
        raise Violation(f"{path}: a Decimal needs its scale parameter")
    if t == "array":
        if "items" not in node:
            raise Violation(f"{path}: an array schema needs 'items'")
        schema_of(node["items"], path + ".items")
    if t == "struct":
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise Violation(f"{path}: a struct schema needs a 'fields' array")
        names = set()
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("field"), str):
                raise Violation(f"{path}: each field needs a string 'field'")
            if f["field"] in names:
                raise Violation(f"{path}: field {f['field']!r} twice")
            names.add(f["field"])
            schema_of(f, path + "." + f["field"])
    if "default" in node:
        value_of(node, node["default"], path + "(default)")


def value_of(schema, value, path):
    """JsonConverter.convertToConnect."""
    if value is None:
        if "default" in schema or schema.get("optional", False):
            return
        raise Violation(f"{path}: null for a required {schema['type']} field")
    t = schema["type"]
    if t == "boolean":
        if not isinstance(value, bool):
            raise Violation(f"{path}: {value!r} is not a boolean")
    elif t in RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Violation(f"{path}: {value!r} is not an integer ({t})")
        bits = RANGES[t]
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise Violation(f"{path}: {value} is out of range for {t}")
    elif t in ("float", "double"):
        if isinstance(value, bool) or not (isinstance(value, (int, float)) or value in NON_NUMERIC):
            raise Violation(f"{path}: {value!r} is not a number ({t})")
    elif t == "string":
        if not isinstance(value, str):
            raise Violation(f"{path}: {value!r} is not a string")
    elif t == "bytes":
        if not isinstance(value, str):
            raise Violation(f"{path}: bytes must be base64 text, not {value!r}")
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise Violation(f"{path}: {value!r} is not base64") from None
    elif t == "array":
        if not isinstance(value, list):
            raise Violation(f"{path}: {value!r} is not an array")
        for i, item in enumerate(value):
            value_of(schema["items"], item, f"{path}[{i}]")
    elif t == "map":
        if not isinstance(value, (dict, list)):
            raise Violation(f"{path}: {value!r} is not a map")
    elif t == "struct":
        if not isinstance(value, dict):
            raise Violation(f"{path}: structs are JSON objects, not {value!r}")
        named = {f["field"]: f for f in schema["fields"]}
        for member in value:
            if member not in named:
                raise Violation(f"{path}: member {member!r} is not in the schema")
        for name, field in named.items():
            value_of(field, value.get(name), f"{path}.{name}")


def check(line, number):
    kind, _, text = line.partition(" ")
    if text.strip() == "null":
        return
    doc = json.loads(text)
    if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
        raise Violation(f"line {number}: not {{'schema','payload'}}")
    schema_of(doc["schema"], f"line {number} schema")
    value_of(doc["schema"], doc["payload"], f"line {number} payload")
    if kind == "value":
        name = doc["schema"].get("name", "")
        if doc["schema"]["type"] != "struct" or not name.endswith(".Envelope"):
            raise Violation(f"line {number}: a value's schema is not a Debezium envelope ({name!r})")
    elif kind == "key":
        if doc["schema"]["type"] != "struct" or not doc["schema"].get("name", "").endswith(".Key"):
            raise Violation(f"line {number}: a key's schema is not a struct named '....Key'")
    else:
        raise Violation(f"line {number}: starts with neither 'key ' nor 'value '")


def main():
    count = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                check(line.rstrip("\n"), number)
            except Violation as v:
                print(v)
                return 1
            count += 1
    print(f"{count} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
