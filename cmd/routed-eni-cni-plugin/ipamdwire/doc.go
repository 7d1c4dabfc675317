// Package ipamdwire is aws-cni's client for ipamd's gRPC API: one unary
// call per connection over HTTP/2 without TLS on ipamd's unix socket, with
// the messages of rpc/rpc.proto (and grpc.health.v1's) encoded field by
// field (wire.go).
//
// It exists for start-up time. The runtime execs aws-cni for every ADD and
// DEL; linking grpc-go and the protobuf runtime made each exec about
// 2 ms slower to reach main (package initialisation and the page faults
// of a binary twice the size) and their first call slower still: an
// ADD+DEL pair took about 40% longer than with this client. What goes on the wire is what grpc-go's client
// sends for a unary call (the gRPC over HTTP/2 protocol), so ipamd, ours
// or upstream's, sees no difference; the package tests check the encoding
// against the generated rpc types and every call against a grpc-go server.
//
// Supported: unary calls, replies of any size (HTTP/2 flow control both
// ways), the server's SETTINGS, PING, GOAWAY and RST_STREAM, padded and
// continued header blocks, grpc-status and grpc-message. Not supported (ipamd uses
// neither): compression and TLS.
//
// Like the rest of the plugin, it never imports pkg/ipamd/..., the
// simulators or ipamd's clients.
package ipamdwire
