package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/cp"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// cniBinaries are copied from the working directory into HOST_CNI_BIN_PATH
// at every start, as upstream's entrypoint does.
var cniBinaries = []string{"aws-cni", "egress-cni"}

// Defaults of the options.
const (
	defaultAgent          = "aws-k8s-agent"
	defaultSocket         = "/var/run/aws-node/ipamd.sock"
	defaultHealthInterval = 500 * time.Millisecond
	// stopGrace bounds how long a failing entrypoint waits for ipamd to
	// stop before killing it.
	stopGrace = 10 * time.Second
)

// options are the entrypoint's inputs besides the environment. In the
// image all are defaults; the others exist for tests and development.
type options struct {
	WorkDir        string   // holds aws-cni, egress-cni, aws-k8s-agent and 10-aws.conflist (image: /app, the working directory)
	Agent          string   // ipamd binary, relative to WorkDir unless absolute
	AgentArgs      []string // arguments for the agent
	AgentEnv       []string // environment added for the agent (ours is inherited)
	Socket         string   // ipamd's gRPC socket, probed for health
	HealthInterval time.Duration
	Stdout, Stderr io.Writer // the agent's output
	// Metadata reads IMDS for the egress plugin's nodeIP (default: the
	// SDK's IMDS client).
	Metadata metadataFunc
}

func (o *options) setDefaults() {
	if o.WorkDir == "" {
		o.WorkDir = "."
	}
	if o.Agent == "" {
		o.Agent = defaultAgent
	}
	if o.Socket == "" {
		o.Socket = defaultSocket
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = defaultHealthInterval
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Metadata == nil {
		o.Metadata = imdsMetadata("")
	}
}

// run is the entrypoint: validate the environment, render the conflist
// (so a bad template fails before anything starts), install the CNI
// binaries, start ipamd, wait for its health, publish the conflist, and
// stay until ipamd exits, forwarding the signals received on sigs. It
// returns the process exit code: 0 when ipamd exits cleanly, 1 otherwise.
func run(o options, env envutil.Lookup, sigs <-chan os.Signal, log *slog.Logger) int {
	o.setDefaults()
	s, err := loadSettings(envutil.Env{Lookup: env, Warn: envutil.SlogWarn(log)})
	if err != nil {
		log.Error("invalid configuration", "error", err)
		return 1
	}
	if err := resolveNodeIP(context.Background(), &s, o.Metadata, log); err != nil {
		log.Error("cannot find the node IP for the egress plugin", "error", err)
		return 1
	}
	tmplPath := filepath.Join(o.WorkDir, conflistName)
	tmpl, err := os.ReadFile(tmplPath)
	if err != nil {
		log.Error("cannot read the conflist template", "error", err)
		return 1
	}
	conf, err := renderConflist(tmpl, s)
	if err != nil {
		log.Error("cannot render the conflist", "template", tmplPath, "error", err)
		return 1
	}
	if err := installBinaries(o.WorkDir, s.HostCNIBinPath, log); err != nil {
		log.Error("cannot install the CNI plugins", "error", err)
		return 1
	}

	// Absolute, so exec never searches $PATH for a bare "aws-k8s-agent".
	agentPath := o.Agent
	if !filepath.IsAbs(agentPath) {
		agentPath = filepath.Join(o.WorkDir, agentPath)
	}
	if abs, err := filepath.Abs(agentPath); err == nil {
		agentPath = abs
	}
	agent, err := startAgent(agentPath, o.AgentArgs, o.WorkDir, o.AgentEnv, o.Stdout, o.Stderr)
	if err != nil {
		log.Error("cannot start ipamd", "path", agentPath, "error", err)
		return 1
	}
	log.Info("started ipamd", "path", agentPath, "pid", agent.pid())

	// A signal cancels the health wait (the conflist is then not written)
	// and goes to ipamd; we leave when ipamd does.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopping atomic.Bool
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case sig := <-sigs:
				stopping.Store(true)
				cancel()
				log.Info("forwarding signal to ipamd", "signal", sig.String())
				if err := agent.signal(sig); err != nil {
					log.Warn("could not signal ipamd", "error", err)
				}
			case <-agent.done:
				return
			}
		}
	}()

	confPath := filepath.Join(s.HostCNIConfDir, conflistName)
	err = waitHealthy(ctx, agent.done, socketCheck(o.Socket), o.HealthInterval, log)
	switch {
	case err == nil && !stopping.Load():
		if err := writeConflist(confPath, conf); err != nil {
			log.Error("cannot write the conflist; stopping ipamd", "error", err)
			agent.stop(stopGrace)
			<-forwarded
			return 1
		}
		log.Info("wrote the CNI configuration; the node's network is ready", "path", confPath)
	case errors.Is(err, errAgentExited):
		log.Error("ipamd exited before it became healthy; conflist not written")
	default:
		log.Info("stopping before ipamd became healthy; conflist not written")
	}

	<-agent.done
	<-forwarded
	if agent.err != nil {
		log.Error("ipamd exited", "error", agent.err)
		return 1
	}
	log.Info("ipamd exited cleanly")
	return 0
}

// installBinaries copies the CNI binaries into the host's bin directory.
func installBinaries(workDir, binDir string, log *slog.Logger) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	for _, name := range cniBinaries {
		dst := filepath.Join(binDir, name)
		if err := cp.File(filepath.Join(workDir, name), dst); err != nil {
			return err
		}
		log.Info("installed CNI binary", "path", dst)
	}
	return nil
}

// writeConflist publishes the rendered conflist (mode 0644) atomically, so
// the runtime never loads half a file.
func writeConflist(path string, conf []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := cp.WriteFile(path, conf, 0o644); err != nil {
		return fmt.Errorf("conflist: %w", err)
	}
	return nil
}
