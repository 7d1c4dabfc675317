package ipamd

import (
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/config"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/nodeinit"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Config is ipamd's configuration from the environment (package config
// reads it; these names are the agent's API).
type Config = config.Config

// ErrUnsupported marks settings this build refuses rather than half-honours.
var ErrUnsupported = config.ErrUnsupported

// Defaults that upstream uses.
const (
	DefaultIntrospectionAddress = config.DefaultIntrospectionAddress
	DefaultLogFile              = config.DefaultLogFile
	DefaultMetricsAddress       = ":61678"
	DefaultSocketPath           = "/var/run/aws-node/ipamd.sock"
	// DefaultMaxPodsFile is where the image ships upstream's max-pods table.
	DefaultMaxPodsFile = nodeinit.DefaultMaxPodsFile
)

// LoadConfig reads the configuration from lookup (config.LoadConfig).
func LoadConfig(lookup envutil.Lookup) (Config, error) { return config.LoadConfig(lookup) }

// Load reads the configuration through env (config.Load).
func Load(env envutil.Env) (Config, error) { return config.Load(env) }

// eniRules are the settings that decide which attached ENIs ipamd uses
// (MANAGE_UNTAGGED_ENI; in IMDS-only mode tags cannot be read).
func eniRules(cfg Config) pool.ENIRules {
	return pool.ENIRules{IgnoreUntagged: !cfg.ManageUntaggedENI, TagsUnknown: cfg.IMDSOnlyMode}
}
