// Package ec2fault owns a test-only fault layer for the EC2 simulator: an
// HTTP reverse proxy that sits in front of the simulator's EC2 endpoint
// (pkg/sim/ec2sim) and corrupts single DescribeNetworkInterfaces answers
// on request, so that tests can drive the real AWS SDK v2 client (and
// pkg/awsutils on top of it) into the inconsistent reads real EC2 serves
// now and then: an ENI missing from a listing, a prefix or secondary
// address missing from an ENI, an attachment in an unexpected phase.
//
// A Proxy forwards every request to the simulator unchanged and every
// answer back unchanged, byte for byte, except the answers a queued Fault
// applies to. It counts the requests that pass through (Calls) and the
// corruptions it made (Applied). The simulator's own faults (throttling,
// server errors, ...) stay the simulator's; this package only edits
// successful answers.
//
// The package is not a test file so that other packages' tests can import
// it; nothing outside tests should.
package ec2fault
