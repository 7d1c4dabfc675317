// Package awsutils is ipamd's access to AWS: the instance's identity and
// attached ENIs from IMDS, and the EC2 actions that grow and shrink the pool.
// It is built on aws-sdk-go-v2 with the SDK's standard configuration, so
// AWS_ENDPOINT_URL_EC2 and AWS_EC2_METADATA_SERVICE_ENDPOINT point it at a
// simulator with no special code path. In IMDS-only mode the client itself
// refuses every EC2 call that changes anything, and
// DescribeNetworkInterfaces, before it is sent.
//
// It never decides how many addresses to ask for (that is warmpool's job)
// and never touches the datastore; errors callers branch on are classified
// into sentinels (ErrSubnetExhausted, ErrAddressLimit, ...). It never
// imports pkg/ipamd or any package under it: ipamd uses it, never the other
// way round (test/imports holds every package to its rule).
package awsutils
