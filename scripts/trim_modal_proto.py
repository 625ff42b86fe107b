#!/usr/bin/env python3
"""Writes the subset of Modal's gRPC API that rex's Modal deployment calls, as a .proto file, from
the message descriptors compiled into the pinned `modal` package (tests/modal/requirements.txt;
Modal publishes no .proto in its wheel, and the protocol of its repository's default branch need
not be the one of the pinned release).

Usage (from the repository's root, after scripts/common.sh's rex_modal_env):

    build/modal-env/bin/python scripts/trim_modal_proto.py > src/backends/modal/api.proto
    build/modal-env/bin/python scripts/trim_modal_proto.py --check src/backends/modal/api.proto

The first regenerates the file (do so when the pinned `modal` changes, or when RPCS below does).
--check exits non-zero unless the file is exactly what would be generated, and compiles it with
protoc (Debian's protobuf-compiler) to make sure every kept message, enum and method is, field by
field, the one of the package's descriptors: same names, numbers, types, labels, oneofs.

What is kept: the service modal.client.ModalClient with only the methods of RPCS, and every
message and enum those methods reach (their requests, responses, and the types of their fields,
transitively), each whole: nothing is renamed or renumbered, no field is dropped. Since protobuf's
wire format depends only on field numbers and types (and gRPC's on the method path
/modal.client.ModalClient/<Rpc>), a client built from the subset talks to the full service; fields
the subset lacks are skipped by the parser, as any unknown field is. The original's comments are not
in the descriptors, so none are carried over. Identifiers that would collide with a C or POSIX
macro once compiled to C++ (the full api.proto's SeekWhence enum, SEEK_SET..., is one) would be
renamed through RENAMES, which is empty because the subset has none (checked by compiling the
generated C++ after every system header that defines such macros).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from importlib import metadata

from google.protobuf import descriptor_pb2

from modal_proto import api_pb2

# What rex's Modal deployment calls, in the order it calls them; V1 and V2 sandbox APIs both.
RPCS = [
    "ClientHello",  # credentials check (and the server's warnings) before anything else
    "AuthTokenGet",  # V2: the JWT sent as x-modal-auth-token on the V2 sandbox calls
    "AppGetOrCreate",
    "EnvironmentGetOrCreate",  # the environment's image builder version, for ImageGetOrCreate
    "SecretGetOrCreate",  # V1: an app-owned secret with REX_AUTH_TOKEN (V2 passes it inline)
    "ImageGetOrCreate",
    "ImageJoinStreaming",
    "MountBatchedCheckExistence",  # skips uploading a rex-server Modal already has
    "BlobCreate",  # files of 4 MiB or more are uploaded to a blob first (rex-server is ~7 MB)
    "MountPutFile",
    "MountGetOrCreate",
    "SandboxCreate",
    "SandboxCreateV2",
    "SandboxGetTaskId",  # V1: polled until the sandbox is scheduled (V2 returns it on create)
    "SandboxGetTunnels",
    "SandboxGetTunnelsV2",
    "SandboxWait",
    "SandboxWaitV2",
    "SandboxTerminate",
    "SandboxTerminateV2",
    "SandboxGetLogs",  # the stdout/stderr of an entrypoint that exited early
    "SandboxList",  # a gateway's sandboxes, by its tag: adopted after a restart, orphans removed
]

# Renames of identifiers that clash with C macros in generated C++: {full name: new name}. None
# are needed for RPCS.
RENAMES: dict[str, str] = {}

FD = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    FD.TYPE_DOUBLE: "double", FD.TYPE_FLOAT: "float", FD.TYPE_INT64: "int64", FD.TYPE_UINT64: "uint64",
    FD.TYPE_INT32: "int32", FD.TYPE_FIXED64: "fixed64", FD.TYPE_FIXED32: "fixed32", FD.TYPE_BOOL: "bool",
    FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes", FD.TYPE_UINT32: "uint32", FD.TYPE_SFIXED32: "sfixed32",
    FD.TYPE_SFIXED64: "sfixed64", FD.TYPE_SINT32: "sint32", FD.TYPE_SINT64: "sint64",
}
WELL_KNOWN = {  # types of other files the subset may reach, and the file to import
    ".google.protobuf.Empty": "google/protobuf/empty.proto",
    ".google.protobuf.Timestamp": "google/protobuf/timestamp.proto",
    ".google.protobuf.Any": "google/protobuf/any.proto",
    ".google.protobuf.Struct": "google/protobuf/struct.proto",
    ".google.protobuf.Value": "google/protobuf/struct.proto",
    ".google.protobuf.ListValue": "google/protobuf/struct.proto",
}


def source_file() -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto()
    api_pb2.DESCRIPTOR.CopyToProto(fp)
    return fp


class Trimmer:
    def __init__(self, fp: descriptor_pb2.FileDescriptorProto):
        self.fp = fp
        self.package = "." + fp.package
        self.types: dict[str, object] = {}  # full name -> DescriptorProto / EnumDescriptorProto
        self.top_of: dict[str, str] = {}  # full name -> full name of its top-level type
        for m in fp.message_type:
            self._index(m, self.package, self.package + "." + m.name)
        for e in fp.enum_type:
            self.types[f"{self.package}.{e.name}"] = e
            self.top_of[f"{self.package}.{e.name}"] = f"{self.package}.{e.name}"
        self.kept: set[str] = set()  # top-level full names
        self.imports: set[str] = set()

    def _index(self, m, scope: str, top: str) -> None:
        name = f"{scope}.{m.name}"
        self.types[name], self.top_of[name] = m, top
        for n in m.nested_type:
            self._index(n, name, top)
        for e in m.enum_type:
            self.types[f"{name}.{e.name}"], self.top_of[f"{name}.{e.name}"] = e, top

    def reach(self, type_name: str) -> None:
        if not type_name.startswith(self.package + "."):
            if type_name not in WELL_KNOWN:
                raise SystemExit(f"trim_modal_proto: {type_name} is from another file; add it to WELL_KNOWN")
            self.imports.add(WELL_KNOWN[type_name])
            return
        top = self.top_of[type_name]
        if top in self.kept:
            return
        self.kept.add(top)
        self._reach_fields(self.types[top])

    def _reach_fields(self, t) -> None:
        if isinstance(t, descriptor_pb2.EnumDescriptorProto):
            return
        for f in t.field:
            if f.type_name:
                self.reach(f.type_name)
        for n in t.nested_type:
            self._reach_fields(n)

    # --- rendering ---------------------------------------------------------------------------------
    def ref(self, type_name: str) -> str:
        """A type name as written in the file: relative to the package, fully qualified otherwise."""
        if type_name.startswith(self.package + "."):
            return RENAMES.get(type_name[1:], type_name[len(self.package) + 1 :])
        return type_name[1:]

    @staticmethod
    def options(opts, allowed: dict) -> str:
        found = []
        for field, value in opts.ListFields():
            if field.name not in allowed:
                raise SystemExit(f"trim_modal_proto: option {field.name} is not handled")
            found.append(allowed[field.name](value))
        return f" [{', '.join(found)}]" if found else ""

    def field_type(self, f, msg) -> str:
        if f.type in (FD.TYPE_MESSAGE, FD.TYPE_ENUM):
            return self.ref(f.type_name)
        return SCALARS[f.type]

    def render_enum(self, e, indent: str, full: str) -> list[str]:
        out = [f"{indent}enum {RENAMES.get(full[1:], e.name)} {{"]
        if e.options.ListFields():
            for field, value in e.options.ListFields():
                if field.name != "allow_alias":
                    raise SystemExit(f"trim_modal_proto: enum option {field.name} is not handled")
                out.append(f"{indent}  option allow_alias = {str(value).lower()};")
        for v in e.value:
            # Enum values lose `deprecated`: protoc 3.21 defines <Enum>_MAX as the last value, and
            # when that one is deprecated (AppState's APP_STATE_DERIVED) every C++ file including
            # the header warns. It is only an annotation; the value and its number stay.
            self.options(v.options, {"deprecated": lambda x: ""})
            out.append(f"{indent}  {RENAMES.get(full[1:] + '.' + v.name, v.name)} = {v.number};")
        out += self.render_reserved(e, indent)
        out.append(f"{indent}}}")
        return out

    @staticmethod
    def render_reserved(t, indent: str) -> list[str]:
        out = []
        ranges = []
        for r in t.reserved_range:
            # Messages' ranges are end-exclusive, enums' end-inclusive.
            end = r.end - 1 if isinstance(t, descriptor_pb2.DescriptorProto) else r.end
            ranges.append(str(r.start) if end == r.start else f"{r.start} to {end}")
        if ranges:
            out.append(f"{indent}  reserved {', '.join(ranges)};")
        if t.reserved_name:
            out.append(f"{indent}  reserved {', '.join(repr(n).replace(chr(39), chr(34)) for n in t.reserved_name)};")
        return out

    def render_field(self, f, m, indent: str, maps: dict) -> str:
        opts = self.options(f.options, {
            "deprecated": lambda x: f"deprecated = {str(x).lower()}",
            "packed": lambda x: f"packed = {str(x).lower()}",
            "jstype": lambda x: f"jstype = {descriptor_pb2.FieldOptions.JSType.Name(x)}",
        })
        if f.type_name in maps:
            entry = maps[f.type_name]
            key, value = entry.field[0], entry.field[1]
            return f"{indent}map<{self.field_type(key, entry)}, {self.field_type(value, entry)}> {f.name} = {f.number}{opts};"
        label = ""
        if f.label == FD.LABEL_REPEATED:
            label = "repeated "
        elif f.proto3_optional:
            label = "optional "
        return f"{indent}{label}{self.field_type(f, m)} {f.name} = {f.number}{opts};"

    def render_message(self, m, indent: str, full: str) -> list[str]:
        out = [f"{indent}message {RENAMES.get(full[1:], m.name)} {{"]
        for field, _ in m.options.ListFields():
            raise SystemExit(f"trim_modal_proto: message option {field.name} of {full} is not handled")
        maps = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
        for n in m.nested_type:
            if not n.options.map_entry:
                out += self.render_message(n, indent + "  ", f"{full}.{n.name}")
        for e in m.enum_type:
            out += self.render_enum(e, indent + "  ", f"{full}.{e.name}")
        real_oneofs = {f.oneof_index for f in m.field if f.HasField("oneof_index") and not f.proto3_optional}
        done = set()
        for f in m.field:
            if f.HasField("oneof_index") and f.oneof_index in real_oneofs:
                if f.oneof_index in done:
                    continue
                done.add(f.oneof_index)
                out.append(f"{indent}  oneof {m.oneof_decl[f.oneof_index].name} {{")
                for g in m.field:
                    if g.HasField("oneof_index") and g.oneof_index == f.oneof_index:
                        out.append(self.render_field(g, m, indent + "    ", maps))
                out.append(f"{indent}  }}")
            else:
                out.append(self.render_field(f, m, indent + "  ", maps))
        out += self.render_reserved(m, indent)
        out.append(f"{indent}}}")
        return out

    def render(self, rpcs: list[str]) -> str:
        service = next(s for s in self.fp.service if s.name == "ModalClient")
        methods = {m.name: m for m in service.method}
        missing = [r for r in rpcs if r not in methods]
        if missing:
            raise SystemExit(f"trim_modal_proto: not in ModalClient: {', '.join(missing)}")
        for r in rpcs:
            self.reach(methods[r].input_type)
            self.reach(methods[r].output_type)
        version = metadata.version("modal")
        out = [
            "// A subset of Modal's gRPC API: modal_proto/api.proto of modal-labs/modal-client as",
            f"// released in the `modal` Python package {version} on PyPI, Copyright Modal Labs, under the",
            "// Apache License 2.0 (https://www.apache.org/licenses/LICENSE-2.0).",
            "//",
            "// GENERATED by scripts/trim_modal_proto.py from the descriptors compiled into that package;",
            "// do not edit: change the script's RPCS and run it again (its header says how).",
            "//",
            "// Changes from the original: only the methods below are kept in service ModalClient, and only",
            "// the messages and enums they reach (each complete); the original's comments and file options",
            "// are gone. The package (modal.client), the service, the message, enum and field names and the",
            "// field numbers and types are the original's, and wire compatibility depends only on field",
            "// numbers and types and on the method paths (/modal.client.ModalClient/<Rpc>): a client built",
            "// from this file talks to Modal's service, whose extra fields it skips as unknown ones.",
            "// Enum values lose their `deprecated` option (an annotation only: protoc 3.21's C++ for",
            "// AppState would warn in every file including it, as AppState_MAX is a deprecated value).",
            "// " + ("Nothing is renamed: no identifier here collides with a C or POSIX macro." if not RENAMES
                     else "Renamed (they collide with C macros): " + ", ".join(f"{k} -> {v}" for k, v in RENAMES.items()) + "."),
            "",
            'syntax = "proto3";',
            "",
            f"package {self.fp.package};",
            "",
        ]
        out += [f'import "{i}";' for i in sorted(self.imports)]
        if self.imports:
            out.append("")
        tops = sorted(self.kept, key=lambda n: n.rsplit(".", 1)[-1])
        for name in tops:
            t = self.types[name]
            if isinstance(t, descriptor_pb2.EnumDescriptorProto):
                out += self.render_enum(t, "", name)
            else:
                out += self.render_message(t, "", name)
            out.append("")
        out.append("service ModalClient {")
        for r in rpcs:
            m = methods[r]
            if m.options.ListFields():
                raise SystemExit(f"trim_modal_proto: options of {r} are not handled")
            cs = "stream " if m.client_streaming else ""
            ss = "stream " if m.server_streaming else ""
            out.append(f"  rpc {r}({cs}{self.ref(m.input_type)}) returns ({ss}{self.ref(m.output_type)});")
        out.append("}")
        return "\n".join(out) + "\n"


def normalized(t):
    """A copy without what the subset leaves out on purpose: json names (protoc derives them) and
    enum values' `deprecated` option."""
    c = type(t)()
    c.CopyFrom(t)
    enums = [c] if isinstance(c, descriptor_pb2.EnumDescriptorProto) else list(c.enum_type)
    for e in enums:
        for v in e.value:
            v.options.ClearField("deprecated")
            if not v.options.ListFields():
                v.ClearField("options")
    if isinstance(c, descriptor_pb2.DescriptorProto):
        for f in c.field:
            f.ClearField("json_name")
        for i, n in enumerate(c.nested_type):
            c.nested_type[i].CopyFrom(normalized(n))
    return c


def check(path: str) -> int:
    fp = source_file()
    want = Trimmer(fp).render(RPCS)
    with open(path) as f:
        have = f.read()
    if have != want:
        print(f"trim_modal_proto: {path} is not what the script generates; regenerate it", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "subset.pb")
        done = subprocess.run(["protoc", f"-I{os.path.dirname(os.path.abspath(path))}", "--include_imports",
                               f"--descriptor_set_out={out}", os.path.basename(path)])
        if done.returncode != 0:
            print(f"trim_modal_proto: protoc does not compile {path}", file=sys.stderr)
            return 1
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    sub = next(f for f in fds.file if f.name == os.path.basename(path))
    originals = {m.name: m for m in fp.message_type} | {e.name: e for e in fp.enum_type}
    n = 0
    for t in list(sub.message_type) + list(sub.enum_type):
        if normalized(t) != normalized(originals[t.name]):
            print(f"trim_modal_proto: {t.name} differs from the package's descriptor", file=sys.stderr)
            return 1
        n += 1
    service = next(s for s in sub.service if s.name == "ModalClient")
    methods = {m.name: m for m in next(s for s in fp.service if s.name == "ModalClient").method}
    for m in service.method:
        if m != methods[m.name]:
            print(f"trim_modal_proto: method {m.name} differs", file=sys.stderr)
            return 1
    if sub.package != fp.package or [m.name for m in service.method] != RPCS:
        print("trim_modal_proto: package or method list differs", file=sys.stderr)
        return 1
    print(f"trim_modal_proto: {path} is up to date; protoc compiles it; its {len(service.method)} methods, "
          f"{n} top-level messages and enums equal modal {metadata.version('modal')}'s descriptors")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description="Print the subset of Modal's api.proto rex uses.")
    p.add_argument("--check", metavar="PROTO", help="compare PROTO with what would be generated, and verify it")
    args = p.parse_args()
    if args.check:
        return check(args.check)
    sys.stdout.write(Trimmer(source_file()).render(RPCS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
