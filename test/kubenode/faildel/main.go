// Command faildel is a chained CNI plugin for the kubenode tests that
// fails on DEL while a flag file exists, as a chained policy or
// bandwidth plugin that errors on DEL does: chained last, it runs first
// on DEL (DELs run in reverse order), so the runtime's teardown fails
// before the plugins before it (aws-cni) are called.
//
// ADD passes the previous result through; CHECK, STATUS and GC succeed;
// DEL fails while the flag file (the conf's "failDelFlag", default
// /run/kubenode-fail-del) exists and succeeds otherwise.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// DefaultFlag is the flag file whose presence makes DEL fail.
const DefaultFlag = "/run/kubenode-fail-del"

type conf struct {
	types.NetConf
	FailDelFlag string `json:"failDelFlag"`
}

func parse(stdin []byte) (*conf, error) {
	c := &conf{}
	if err := json.Unmarshal(stdin, c); err != nil {
		return nil, fmt.Errorf("faildel: parse the network configuration: %w", err)
	}
	if c.FailDelFlag == "" {
		c.FailDelFlag = DefaultFlag
	}
	return c, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	c, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	if err := version.ParsePrevResult(&c.NetConf); err != nil {
		return fmt.Errorf("faildel: parse prevResult: %w", err)
	}
	if c.PrevResult == nil {
		// Chained only: without a previous result there is nothing to pass on.
		return types.PrintResult(&current.Result{CNIVersion: current.ImplementedSpecVersion}, c.CNIVersion)
	}
	return types.PrintResult(c.PrevResult, c.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	c, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.FailDelFlag); err == nil {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("kubenode-faildel: DEL of container %s refused while %s exists", args.ContainerID, c.FailDelFlag),
			"the test's chained plugin fails every DEL while its flag file exists")
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kubenode-faildel: stat %s: %w", c.FailDelFlag, err)
	}
	return nil
}

func ok(*skel.CmdArgs) error { return nil }

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  ok,
		Status: ok,
		GC:     ok,
	}, version.All, "kubenode-faildel: a chained plugin that fails DEL on a flag")
}
