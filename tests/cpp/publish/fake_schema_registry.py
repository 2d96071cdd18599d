#!/usr/bin/env python3
"""tests/cpp/publish/fake_schema_registry.py: a stand-in for Confluent's Schema Registry, for
tests only (no registry can be installed here). Serves on 127.0.0.1, a free port, and prints
"url http://127.0.0.1:PORT" first. POST /subjects/<subject>/versions with {"schema": "..."}
answers {"id": N}: one id per distinct schema text (the same schema under another subject gets
the same id, as a real registry does), an Avro schema that Apache Avro's Python library
(python3-avro) cannot parse is refused with 422 and error_code 42201, as the registry refuses an
invalid schema. GET /schemas/ids/<id> answers {"schema": "..."}. After each registration it
writes {"schemas": {"<id>": schema}, "subjects": {subject: [ids]}, "posts": n} to the file named
by its one argument. Used by kafka_test.cc (DebeziumAvro...).
"""
import json
import os
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import avro.schema

STATE = {"schemas": {}, "subjects": {}, "posts": 0}
IDS = {}


class Handler(BaseHTTPRequestHandler):
    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        parts = self.path.split("/")
        if len(parts) != 4 or parts[1] != "subjects" or parts[3] != "versions":
            return self.answer(404, {"error_code": 404, "message": "not found"})
        subject = urllib.parse.unquote(parts[2])
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        schema = body["schema"]
        try:
            avro.schema.parse(schema)
        except Exception as e:  # what the registry says of an invalid schema
            return self.answer(422, {"error_code": 42201, "message": f"Invalid schema: {e}"})
        STATE["posts"] += 1
        schema_id = IDS.setdefault(schema, len(IDS) + 1)
        STATE["schemas"][str(schema_id)] = schema
        ids = STATE["subjects"].setdefault(subject, [])
        if schema_id not in ids:
            ids.append(schema_id)
        with open(sys.argv[1] + ".tmp", "w") as f:
            json.dump(STATE, f)
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        self.answer(200, {"id": schema_id})

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) == 4 and parts[1] == "schemas" and parts[2] == "ids" and parts[3] in STATE["schemas"]:
            return self.answer(200, {"schema": STATE["schemas"][parts[3]]})
        self.answer(404, {"error_code": 40403, "message": "Schema not found"})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"url http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
