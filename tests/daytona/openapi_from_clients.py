#!/usr/bin/env python3
"""Rebuilds Daytona's OpenAPI documents from Daytona's generated Python clients.

usage: openapi_from_clients.py WHEEL_OR_DIR [WHEEL_OR_DIR...] --out DIR

Daytona publishes its OpenAPI documents only in its GitHub repositories (daytona/clients:
api-client-go/api/openapi.yaml, toolbox-api-client-go/api/openapi.yaml), which the test machines
cannot reach. The Python clients that OpenAPI Generator makes from those documents are on PyPI
(daytona-api-client, daytona-toolbox-api-client, one release per SDK version) and keep what a
contract check needs: every operation's method, path, parameters (where, name, required, type),
request body and content type, each status code the document lists with its schema, the
security each operation asks for, and every schema (properties with their JSON names, types,
which are required, which are nullable, enums). This reads them as source (the `ast` module;
nothing is imported or run, so no dependency is needed) and writes, for each client package
found, DIR/<package>.json, an OpenAPI 3.0.3 document: daytona_api_client.json (the main API) and
daytona_toolbox_api_client.json (the toolbox).

What is lost on the way, and so not checked: descriptions, examples, formats other than
date-time/binary, numeric and length limits, and enums that the generator turned into field
validators. Unknown shapes become the schema {} (anything).
"""
import argparse
import ast
import json
import os
import re
import sys
import tempfile
import zipfile

SCALARS = {
    "StrictStr": {"type": "string"}, "str": {"type": "string"},
    "StrictInt": {"type": "integer"}, "int": {"type": "integer"},
    "StrictFloat": {"type": "number"}, "float": {"type": "number"},
    "StrictBool": {"type": "boolean"}, "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytearray": {"type": "string", "format": "binary"},
    "StrictBytes": {"type": "string", "format": "binary"},
    "bytes": {"type": "string", "format": "binary"},
    "Any": {}, "object": {},
}


def name_of(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def subscript_args(node):
    s = node.slice
    return list(s.elts) if isinstance(s, ast.Tuple) else [s]


def annotation_schema(node, models):
    """(schema, optional) of a type annotation."""
    if isinstance(node, ast.Constant) and node.value is None:
        return {}, True
    if isinstance(node, ast.Subscript):
        head = name_of(node.value)
        args = subscript_args(node)
        if head == "Annotated":
            return annotation_schema(args[0], models)
        if head == "Optional":
            schema, _ = annotation_schema(args[0], models)
            return schema, True
        if head in ("List", "list", "Set", "set"):
            item, _ = annotation_schema(args[0], models)
            return {"type": "array", "items": item}, False
        if head in ("Dict", "dict"):
            value, _ = annotation_schema(args[1], models)
            return {"type": "object", "additionalProperties": value}, False
        if head == "Union":
            optional = any(isinstance(a, ast.Constant) and a.value is None for a in args)
            members = [a for a in args if not (isinstance(a, ast.Constant) and a.value is None)]
            members = [subscript_args(a)[0] if isinstance(a, ast.Subscript) and
                       name_of(a.value) == "Annotated" else a for a in members]
            names = {name_of(a) for a in members}
            if names <= {"StrictFloat", "StrictInt", "float", "int"}:
                return {"type": "number"}, optional
            if "StrictBytes" in names or "bytearray" in names:
                return {"type": "string", "format": "binary"}, optional
            schemas = [annotation_schema(a, models)[0] for a in members]
            return ({"oneOf": schemas} if len(schemas) > 1 else schemas[0]), optional
        if head == "Tuple":
            return {}, False
        return {}, False
    n = name_of(node)
    if n in SCALARS:
        return dict(SCALARS[n]), False
    if n in models:
        return {"$ref": f"#/components/schemas/{n}"}, False
    return {}, False


def keyword(call, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


# --- Models -------------------------------------------------------------------------------------

def read_models(model_dir):
    """Class name -> (kind, class AST) for every model module."""
    found = {}
    for file in sorted(os.listdir(model_dir)):
        if not file.endswith(".py") or file == "__init__.py":
            continue
        tree = ast.parse(open(os.path.join(model_dir, file), encoding="utf-8").read())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = {name_of(b) for b in node.bases}
                if "Enum" in bases:
                    found[node.name] = ("enum", node)
                elif "BaseModel" in bases:
                    found[node.name] = ("model", node)
    return found


def model_schema(cls, models):
    if any(isinstance(s, ast.AnnAssign) and name_of(s.target) == "actual_instance"
           for s in cls.body):
        return {}  # oneOf/anyOf wrappers: not rebuilt
    nullable = set()
    for node in ast.walk(cls):
        # to_dict's "set to None if X (nullable) is None": _dict['jsonName'] = None
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                node.value.value is None and isinstance(node.targets[0], ast.Subscript) and \
                name_of(node.targets[0].value) == "_dict":
            key = name_of(node.targets[0].slice)
            if key:
                nullable.add(key)
    props, required = {}, []
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        field = stmt.target.id
        if field == "additional_properties" or name_of(stmt.annotation) == "ClassVar" or (
                isinstance(stmt.annotation, ast.Subscript) and
                name_of(stmt.annotation.value) == "ClassVar"):
            continue
        json_name, has_default = field, stmt.value is not None
        if isinstance(stmt.value, ast.Call) and name_of(stmt.value.func) == "Field":
            alias = keyword(stmt.value, "serialization_alias") or keyword(stmt.value, "alias")
            if alias is not None:
                json_name = literal(alias)
            has_default = keyword(stmt.value, "default") is not None or \
                keyword(stmt.value, "default_factory") is not None
        schema, optional = annotation_schema(stmt.annotation, models)
        if optional and (not has_default or json_name in nullable):
            schema = {"allOf": [schema], "nullable": True} if "$ref" in schema else \
                dict(schema, nullable=True)
        props[json_name] = schema
        if not has_default:
            required.append(json_name)
    out = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


def enum_schema(cls):
    # The generator's catch-all member for values a newer server may send is no part of the enum.
    values = [literal(s.value) for s in cls.body
              if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and
              name_of(s.targets[0]) != "UNKNOWN_DEFAULT_OPEN_API"]
    values = [v for v in values if v is not None]
    kinds = {type(v) for v in values}
    return {"type": "integer" if kinds == {int} else "string", "enum": values}


# --- Operations ---------------------------------------------------------------------------------

def call_list_strings(node):
    """The string constants of the first list argument of a call."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List):
        return [literal(e) for e in node.args[0].elts if isinstance(e, ast.Constant)]
    return []


def first_name(node):
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in ("self", "datetime", "isinstance"):
            return n.id
    return None


def read_serializer(fn):
    op = {"path_params": {}, "query": [], "headers": {}, "form": [], "files": [], "body": None,
          "accept": [], "content_types": [], "auth": []}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and name_of(node.func) == "param_serialize":
            op["method"] = literal(keyword(node, "method"))
            op["path"] = literal(keyword(node, "resource_path"))
        elif isinstance(node, ast.Call) and name_of(node.func) == "append" and \
                isinstance(node.func, ast.Attribute) and node.args and \
                isinstance(node.args[0], ast.Tuple):
            target = name_of(node.func.value)
            key = literal(node.args[0].elts[0])
            var = first_name(node.args[0].elts[1])
            if target == "_query_params" and (key, var) not in op["query"]:
                op["query"].append((key, var))
            elif target == "_form_params":
                op["form"].append((key, var))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript):
                    owner, key = name_of(t.value), literal(t.slice)
                    if owner == "_path_params":
                        op["path_params"][key] = first_name(node.value)
                    elif owner == "_header_params" and key == "Accept":
                        op["accept"] = call_list_strings(node.value)
                    elif owner == "_header_params" and key != "Content-Type":
                        op["headers"][key] = first_name(node.value)
                    elif owner == "_files":
                        op["files"].append((key, first_name(node.value)))
                elif isinstance(t, ast.Name) and t.id == "_body_params" and \
                        node.value is not None and not (
                            isinstance(node.value, ast.Constant) and node.value.value is None):
                    op["body"] = first_name(node.value)
                elif isinstance(t, ast.Name) and t.id == "_auth_settings":
                    op["auth"] = literal(node.value) or []
                elif isinstance(t, ast.Name) and t.id == "_default_content_type":
                    op["content_types"] = call_list_strings(node.value)
    return op


def read_public(fn, models):
    """Parameter name -> (schema, required), the response map and the summary of a method."""
    params = {}
    args = fn.args.args[1:]
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    for arg, default in zip(args, defaults):
        if arg.arg.startswith("_") or arg.annotation is None:
            continue
        schema, optional = annotation_schema(arg.annotation, models)
        params[arg.arg] = (schema, default is None and not optional)
    responses = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.AnnAssign) and name_of(node.target) == "_response_types_map":
            responses = literal(node.value) or {}
    doc = ast.get_docstring(fn) or ""
    return params, responses, doc.strip().split("\n")[0]


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def build(package_dir):
    package = os.path.basename(package_dir.rstrip("/"))
    models = read_models(os.path.join(package_dir, "models"))
    schemas = {}
    for name, (kind, cls) in sorted(models.items()):
        schemas[name] = enum_schema(cls) if kind == "enum" else model_schema(cls, models)
    paths = {}
    used_security = set()
    api_dir = os.path.join(package_dir, "api")
    for file in sorted(os.listdir(api_dir)):
        if not file.endswith(".py") or file == "__init__.py":
            continue
        tree = ast.parse(open(os.path.join(api_dir, file), encoding="utf-8").read())
        tag = file[:-3].removesuffix("_api")
        for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
            fns = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            for fname, fn in fns.items():
                m = re.fullmatch(r"_(\w+)_serialize", fname)
                if not m or m.group(1) not in fns:
                    continue
                name = m.group(1)
                ser = read_serializer(fn)
                params, responses, summary = read_public(fns[name], models)
                operation = {"operationId": camel(name), "tags": [tag], "responses": {}}
                if summary:
                    operation["summary"] = summary
                plist = []
                for key, var in ser["path_params"].items():
                    plist.append({"name": key, "in": "path", "required": True,
                                  "schema": params.get(var, ({"type": "string"}, True))[0]})
                for key, var in ser["query"]:
                    schema, req = params.get(var, ({}, False))
                    entry = {"name": key, "in": "query", "required": req, "schema": schema}
                    if schema.get("type") == "array":
                        entry.update(style="form", explode=True)
                    plist.append(entry)
                for key, var in ser["headers"].items():
                    schema, req = params.get(var, ({"type": "string"}, False))
                    plist.append({"name": key, "in": "header", "required": req, "schema": schema})
                if plist:
                    operation["parameters"] = plist
                if ser["body"]:
                    schema, req = params.get(ser["body"], ({}, True))
                    types = ser["content_types"] or ["application/json"]
                    operation["requestBody"] = {"required": req, "content": {
                        t: {"schema": schema} for t in types}}
                elif ser["form"] or ser["files"]:
                    props, req = {}, []
                    for key, var in ser["form"] + ser["files"]:
                        schema, r = params.get(var, ({}, False))
                        props[key] = schema
                        if r:
                            req.append(key)
                    form = {"type": "object", "properties": props}
                    if req:
                        form["required"] = req
                    types = ser["content_types"] or ["multipart/form-data"]
                    operation["requestBody"] = {"content": {t: {"schema": form} for t in types}}
                for status, type_name in responses.items():
                    resp = {"description": status}
                    if type_name:
                        schema, _ = annotation_schema(ast.parse(type_name, mode="eval").body,
                                                      models)
                        resp["content"] = {t: {"schema": schema}
                                           for t in (ser["accept"] or ["application/json"])}
                    operation["responses"][status] = resp
                if ser["auth"]:
                    operation["security"] = [{a: []} for a in ser["auth"]]
                    used_security.update(ser["auth"])
                method = (ser.get("method") or "get").lower()
                paths.setdefault(ser["path"], {})[method] = operation
    title = {"daytona_api_client": "Daytona",
             "daytona_toolbox_api_client": "Daytona Toolbox API"}.get(package, package)
    doc = {"openapi": "3.0.3",
           "info": {"title": title, "version": "rebuilt from the Python client",
                    "license": {"name": "Apache-2.0"}},
           "servers": [{"url": "/"}], "paths": dict(sorted(paths.items())),
           "components": {"schemas": schemas}}
    if used_security:
        doc["components"]["securitySchemes"] = {
            s: {"type": "http", "scheme": "bearer"} for s in sorted(used_security)}
    return package, doc


def package_dirs(source, scratch):
    if zipfile.is_zipfile(source):
        target = os.path.join(scratch, os.path.basename(source))
        with zipfile.ZipFile(source) as z:
            z.extractall(target)
        source = target
    return [os.path.join(source, d) for d in sorted(os.listdir(source))
            if os.path.isdir(os.path.join(source, d, "api")) and
            os.path.isdir(os.path.join(source, d, "models"))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", help="wheels (.whl) or unpacked directories")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    found = 0
    with tempfile.TemporaryDirectory() as scratch:
        for source in args.sources:
            for package_dir in package_dirs(source, scratch):
                package, doc = build(package_dir)
                path = os.path.join(args.out, package + ".json")
                with open(path, "w") as f:
                    json.dump(doc, f, indent=1)
                n_ops = sum(len(v) for v in doc["paths"].values())
                print(f"{path}: {n_ops} operations, {len(doc['components']['schemas'])} schemas")
                found += 1
    if not found:
        sys.exit("no client package (a directory with api/ and models/) found")


if __name__ == "__main__":
    main()
