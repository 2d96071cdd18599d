#!/usr/bin/env python3
"""tests/cpp/publish/flink_json_check.py: reads a file of Debezium JSON change events, one per
line ("null" for a tombstone, an empty message), and checks each the way Apache Flink's
`debezium-json` format turns a message into rows (flink-formats/flink-json,
org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema.deserialize):

- an empty message (a tombstone) is skipped;
- the envelope is the message itself, or its "payload" member with `schema-include=true`
  (pass --schema-include), which must then be there;
- "op" "c" and "r" emit "after" as an INSERT, which must be an object;
- "u" needs "before" (else Flink fails the job with "The "before" field of UPDATE message is
  null, if you are using Debezium Postgres Connector, please check the Postgres table has been
  set REPLICA IDENTITY to FULL level.") and "after"; an empty "before" object emits no
  UPDATE_BEFORE;
- "d" needs "before" (the same message, "DELETE");
- any other op fails the job ("Unknown "op" value") unless ignore-parse-errors is set.

With --flink-cdc, also the rules of Flink CDC's pipeline format (flink-cdc-connectors'
DebeziumJsonDeserializationSchema for its Kafka pipeline source): "source" must carry "db" and
"table" ("Cannot get database or table name in Debezium JSON").

Exit status 0 and "N messages, M rows" when every message passes; 1 and the first refusal, in
Flink's words, otherwise. No JVM here, so these are Flink's rules written from its source, not
Flink itself.
"""
import json
import sys

REPLICA_IDENTITY = ('The "before" field of {} message is null, if you are using Debezium '
                    'Postgres Connector, please check the Postgres table has been set REPLICA '
                    'IDENTITY to FULL level.')


class Refused(Exception):
    pass


def rows_of(line, schema_include, flink_cdc):
    if line == "null" or line == "":
        return 0  # tombstone: skipped
    root = json.loads(line)
    payload = root.get("payload") if schema_include else root
    if not isinstance(payload, dict):
        raise Refused("Corrupt Debezium JSON message: no envelope")
    op = payload.get("op")
    before, after = payload.get("before"), payload.get("after")
    if flink_cdc:
        source = payload.get("source")
        if not isinstance(source, dict) or source.get("db") is None or source.get("table") is None:
            raise Refused("Cannot get database or table name in Debezium JSON")
    if op in ("c", "r"):
        if not isinstance(after, dict):
            raise Refused(f"Corrupt Debezium JSON message: op {op!r} without \"after\"")
        return 1
    if op == "u":
        if before is None:
            raise Refused(REPLICA_IDENTITY.format("UPDATE"))
        if not isinstance(after, dict) or not isinstance(before, dict):
            raise Refused("Corrupt Debezium JSON message: \"before\" or \"after\" not an object")
        return 2 if before else 1
    if op == "d":
        if before is None:
            raise Refused(REPLICA_IDENTITY.format("DELETE"))
        if not isinstance(before, dict):
            raise Refused("Corrupt Debezium JSON message: \"before\" not an object")
        return 1
    raise Refused(f'Unknown "op" value "{op}"')


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    schema_include = "--schema-include" in sys.argv
    flink_cdc = "--flink-cdc" in sys.argv
    messages = rows = 0
    with open(args[0]) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            try:
                rows += rows_of(line, schema_include, flink_cdc)
            except (Refused, ValueError) as e:
                print(f"message {n}: {e}")
                return 1
            messages += 1
    print(f"{messages} messages, {rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
