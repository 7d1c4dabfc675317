package helmtest

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// images renders with vals and returns the aws-node, init and node agent
// image references.
func images(t *testing.T, vals map[string]interface{}) (awsNode, initC, agent string) {
	t.Helper()
	r := renderObjects(t, vals)
	spec := r.daemonSet.Spec.Template.Spec
	return r.awsNode(t).Image, container(t, spec.InitContainers, "aws-vpc-cni-init").Image,
		container(t, spec.Containers, "aws-eks-nodeagent").Image
}

func TestImages(t *testing.T) {
	if got := theChart(t).Metadata.AppVersion; got != appVersion {
		t.Fatalf("Chart.yaml appVersion %s; update appVersion in chart_test.go", got)
	}
	img := func(kv ...interface{}) map[string]interface{} {
		m := map[string]interface{}{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	// upstream is a values file written for upstream's chart v1.23.1: its
	// whole image block, here for eu-west-1.
	upstream := img("tag", "v1.23.1", "domain", "amazonaws.com", "region", "eu-west-1", "endpoint", "ecr", "account", "602401143452", "pullPolicy", "IfNotPresent", "overrideRepository", "", "override", "")
	for _, c := range []struct {
		name            string
		vals            map[string]interface{}
		awsNode, initC  string
		agentNotDefault string // "" = the default node agent image
	}{
		{
			name:    "defaults: this project's images, tagged with appVersion",
			vals:    map[string]interface{}{},
			awsNode: awsNodeImage, initC: initImage,
		},
		{
			name:    "projectRegistry is the one value to change",
			vals:    img("projectRegistry", "111122223333.dkr.ecr.eu-west-1.amazonaws.com/"),
			awsNode: "111122223333.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni:" + appVersion,
			initC:   "111122223333.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni-init:" + appVersion,
		},
		{
			name:    "own tags",
			vals:    img("image", img("tag", "v9"), "init", img("image", img("tag", "v8"))),
			awsNode: "ghcr.io/amazon-vpc-cni-leakfix/amazon-k8s-cni:v9",
			initC:   "ghcr.io/amazon-vpc-cni-leakfix/amazon-k8s-cni-init:v8",
		},
		{
			name:    "upstream's values file: AWS's images, exactly as upstream renders them",
			vals:    img("image", upstream, "init", img("image", upstream), "nodeAgent", img("image", img("region", "eu-west-1"))),
			awsNode: "602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni:v1.23.1",
			initC:   "602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni-init:v1.23.1",
			// As upstream: the node agent follows its own region.
			agentNotDefault: "602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon/aws-network-policy-agent:v1.4.2",
		},
		{
			name:    "one ECR field selects AWS's image with upstream's other defaults and release",
			vals:    img("image", img("account", "602401143452")),
			awsNode: "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.23.1",
			initC:   initImage,
		},
		{
			name:    "China partition",
			vals:    img("init", img("image", img("account", "961992271922", "region", "cn-northwest-1", "domain", "amazonaws.com.cn", "tag", "v1.23.1"))),
			awsNode: awsNodeImage,
			initC:   "961992271922.dkr.ecr.cn-northwest-1.amazonaws.com.cn/amazon-k8s-cni-init:v1.23.1",
		},
		{
			name:    "overrideRepository takes the tag, else appVersion",
			vals:    img("image", img("overrideRepository", "mirror.example.com/cni", "tag", "v2"), "init", img("image", img("overrideRepository", "mirror.example.com/cni-init"))),
			awsNode: "mirror.example.com/cni:v2",
			initC:   "mirror.example.com/cni-init:" + appVersion,
		},
		{
			name:    "override wins over everything",
			vals:    img("image", img("override", "mirror.example.com/x@sha256:"+strings.Repeat("a", 64), "account", "602401143452", "overrideRepository", "m/y")),
			awsNode: "mirror.example.com/x@sha256:" + strings.Repeat("a", 64),
			initC:   initImage,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, i, n := images(t, c.vals)
			if a != c.awsNode {
				t.Errorf("aws-node image %s, want %s", a, c.awsNode)
			}
			if i != c.initC {
				t.Errorf("init image %s, want %s", i, c.initC)
			}
			wantAgent := nodeAgentImage
			if c.agentNotDefault != "" {
				wantAgent = c.agentNotDefault
			}
			if n != wantAgent {
				t.Errorf("node agent image %s, want %s", n, wantAgent)
			}
		})
	}
}

func TestImageRejects(t *testing.T) {
	for _, c := range []struct {
		vals map[string]interface{}
		want string
	}{
		{map[string]interface{}{"projectRegistry": ""}, "no image for amazon-k8s-cni-init: set projectRegistry"},
		{map[string]interface{}{"nodeAgent": map[string]interface{}{"image": map[string]interface{}{"tag": ""}}}, "the amazon/aws-network-policy-agent image needs a tag"},
	} {
		_, err := renderDocs(t, c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.vals, err, c.want)
		}
	}
}

// TestNotes: the chart has a NOTES.txt, as upstream's, naming the image
// and how to list the pods.
func TestNotes(t *testing.T) {
	ch := theChart(t)
	top, err := chartutil.ToRenderValues(ch, map[string]interface{}{}, chartutil.ReleaseOptions{
		Name: "aws-vpc-cni", Namespace: namespace, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(ch, top)
	if err != nil {
		t.Fatal(err)
	}
	notes := files["aws-vpc-cni/templates/NOTES.txt"]
	for _, want := range []string{
		awsNodeImage,
		`kubectl get pods --namespace ` + namespace + ` -l "app.kubernetes.io/name=aws-node,app.kubernetes.io/instance=aws-vpc-cni"`,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
}
