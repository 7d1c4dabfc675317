// Command generate-config renders charts/aws-vpc-cni with the Helm library
// into config/master/aws-k8s-cni.yaml: the chart's default values plus
// originalMatchLabels=true, namespace kube-system, CRDs included, Helm-only
// labels removed. With -check it only reports whether the file is current.
//
//	go run ./scripts/generate-config [-chart dir] [-out file] [-check]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/aws/amazon-vpc-cni-k8s/scripts/generate-config/render"
)

func main() {
	chartDir := flag.String("chart", "charts/aws-vpc-cni", "chart directory")
	out := flag.String("out", "config/master/aws-k8s-cni.yaml", "manifest to write")
	check := flag.Bool("check", false, "do not write; exit 1 if -out differs from the rendering")
	flag.Parse()

	want, err := render.ConfigMaster(*chartDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "generate-config: render %s: %v\n", *chartDir, err)
		os.Exit(1)
	}
	have, err := os.ReadFile(*out)
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "generate-config: %v\n", err)
		os.Exit(1)
	}
	if bytes.Equal(have, want) {
		fmt.Printf("%s is up to date\n", *out)
		return
	}
	if *check {
		fmt.Fprintf(os.Stderr, "generate-config: %s is stale; run make generate-config\n", *out)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, want, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "generate-config: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s\n", *out)
}
