#!/bin/sh
# Regenerates the protobuf Go code under api/machine. protoc comes from Debian's protobuf-compiler; the Go
# plugins are the versions pinned as tools in go.mod, so every regeneration gives the same output.
set -eu
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc
PATH="$bin:$PATH" protoc -I api/machine -I /usr/include \
	--go_out=api/machine --go_opt=paths=source_relative \
	--go-grpc_out=api/machine --go-grpc_opt=paths=source_relative \
	api/machine/machine.proto api/machine/join.proto
echo "generated: $(ls api/machine/*.pb.go | tr '\n' ' ')"
