// Package rpc holds the gRPC contract between the aws-cni plugin, ipamd and
// the network-policy agent. The .pb.go files are generated and committed so
// that builds never need protoc; regenerate with `make generate-rpc`.
package rpc

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative rpc.proto
