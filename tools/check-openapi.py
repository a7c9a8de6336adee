#!/usr/bin/env python3
"""Checks a server session against docs/openapi.yaml (TeamLogHTTPTests runs it).

Input (JSON): {"routes": [[METHOD, PATH], ...], "responses": [{"method", "route", "status", "contentType",
"body", "lines"?}, ...]}. Checks that the document's operations are exactly the routes, and that every
response has a documented status and content type and validates (JSON Schema 2020-12, as OpenAPI 3.1) —
a JSON body against the schema, a JSON Lines body line by line against `x-line-schema`, SSE `lines`
(the data lines) against the Record schema. Prints "ok N responses" or the problems, exit 1.
"""
import json
import sys

import jsonschema
import yaml


def main(doc_path, samples_path):
    doc = yaml.safe_load(open(doc_path))
    samples = json.load(open(samples_path))
    problems = []
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops if m in
                  ("get", "post", "put", "patch", "delete", "head")}
    served = {(m, p) for m, p in samples["routes"]}
    for route in sorted(served - documented):
        problems.append(f"route {route} is not in the document")
    for route in sorted(documented - served):
        problems.append(f"the document has {route}, which the server does not register")

    def validator(schema):
        root = dict(schema)
        root["components"] = doc.get("components", {})
        return jsonschema.Draft202012Validator(root)

    def resolve(obj):
        while isinstance(obj, dict) and "$ref" in obj and obj["$ref"].startswith("#/components/responses/"):
            obj = doc["components"]["responses"][obj["$ref"].split("/")[-1]]
        return obj

    record_schema = {"$ref": "#/components/schemas/Record"}
    for r in samples["responses"]:
        where = f'{r["method"]} {r["route"]} -> {r["status"]}'
        op = doc["paths"].get(r["route"], {}).get(r["method"].lower())
        if op is None:
            problems.append(f"{where}: no such operation")
            continue
        response = op["responses"].get(str(r["status"]))
        if response is None:
            problems.append(f"{where}: status not documented")
            continue
        content = resolve(response).get("content", {})
        ctype = r["contentType"].split(";")[0].strip()
        media = content.get(ctype)
        if media is None:
            problems.append(f"{where}: content type {ctype!r} not documented ({list(content)})")
            continue
        try:
            if ctype == "application/json":
                errors = list(validator(media["schema"]).iter_errors(json.loads(r["body"])))
                problems += [f"{where}: {e.message} at {list(e.absolute_path)}" for e in errors[:3]]
            elif ctype == "application/x-ndjson" and "x-line-schema" in media:
                v = validator(media["x-line-schema"])
                for n, line in enumerate(r["body"].splitlines(), 1):
                    errors = list(v.iter_errors(json.loads(line)))
                    problems += [f"{where}: line {n}: {e.message}" for e in errors[:3]]
            elif ctype == "text/event-stream":
                v = validator(record_schema)
                for n, line in enumerate(r.get("lines", []), 1):
                    errors = list(v.iter_errors(json.loads(line)))
                    problems += [f"{where}: data line {n}: {e.message}" for e in errors[:3]]
        except ValueError as e:
            problems.append(f"{where}: not JSON: {e}")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"ok {len(samples['responses'])} responses, {len(served)} routes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
