#!/bin/sh
# gen.sh [BASE] — regenerate the Go code of schemas/proto into BASE/gen (default: schemas/gen).
# Everything comes from schemas/tools/go.mod (buf, protoc-gen-go, protoc-gen-go-grpc), built
# into a temp dir: nothing is installed by hand. Before generating it checks the protocol:
# buf lint, and buf breaking against baseline/v1.binpb (the released protocol, an image made
# with `buf build -o`), so that an incompatible change fails make proto and make test.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tools="$here/../tools/go.mod"
base=${1:-"$here/.."}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$here/../tools" && GOWORK=off GOFLAGS= go build -o "$bin/" \
  github.com/bufbuild/buf/cmd/buf \
  google.golang.org/protobuf/cmd/protoc-gen-go \
  google.golang.org/grpc/cmd/protoc-gen-go-grpc)
cd "$here"
PATH="$bin:$PATH" buf lint
PATH="$bin:$PATH" buf breaking --against baseline/v1.binpb
PATH="$bin:$PATH" buf generate -o "$base"
