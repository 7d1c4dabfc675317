// Package support holds aws-cni-support.sh, the node log collector the
// init image copies to the host's /opt/cni/bin (as upstream's init image
// carries one), and its test. The script only reads the node; the test
// runs it against a fake host root and a fake ipamd.
package support
