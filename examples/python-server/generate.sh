#!/usr/bin/env bash
# Generates the Python stubs of the cursor API from proto/ into OUT (default:
# examples/python-server/gen), with Debian's protoc and grpc_python_plugin
# (apt-get install -y protobuf-compiler protobuf-compiler-grpc). Not
# committed: the stubs are made from proto/ every time (the test does too),
# so they are never stale.
#
# OUT gets no __init__.py files: tether/… and google/rpc/… are namespace
# packages, and a google/__init__.py would hide Debian's google.protobuf.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/examples/python-server/gen}
PROTOC=${PROTOC:-/usr/bin/protoc}
PLUGIN=${GRPC_PYTHON_PLUGIN:-/usr/bin/grpc_python_plugin}
for tool in "$PROTOC" "$PLUGIN"; do
  [ -x "$tool" ] || { echo "generate.sh: $tool not found (apt-get install -y protobuf-compiler protobuf-compiler-grpc)" >&2; exit 1; }
done
# proto3 `optional` needs protoc 3.15 or later (python3-grpc-tools' bundled 3.6 fails on it).
rm -rf "$OUT/tether" "$OUT/google"
mkdir -p "$OUT"
"$PROTOC" -I "$ROOT/proto" --python_out="$OUT" --grpc_out="$OUT" --plugin=protoc-gen-grpc="$PLUGIN" \
  "$ROOT/proto/tether/cursor/v1/cursor.proto" "$ROOT/proto/google/rpc/status.proto"
echo "$OUT"
