package simcluster

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// chart is the operator's helm chart, and its release name.
const (
	chart   = "deployments/gpu-operator"
	release = "gpu-operator"
)

// InstallChart installs the chart into Namespace as its documented
// install does, with values (key=value, as helm's --set takes them), and
// returns without waiting: the operator runs as a local process, not as
// the Deployment's pod, so nothing of the release becomes ready.
func (c *Cluster) InstallChart(values ...string) error {
	args := []string{"install", release, chart, "-n", Namespace, "--create-namespace", "--wait=false"}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	_, err := c.Run("bin/helm", args...)
	return err
}

// ChartOperator returns the arguments and plain environment variables of
// the operator container the chart deploys with values (key=value), so
// that the operator run locally is the one installed. Listen addresses
// are left out: a local process listens on loopback ports of the
// caller's choosing (Listen), not the pod's.
func (c *Cluster) ChartOperator(values ...string) (args, env []string, err error) {
	helm := []string{"template", release, chart, "-n", Namespace, "--show-only", "templates/deployment.yaml"}
	for _, v := range values {
		helm = append(helm, "--set", v)
	}
	out, err := c.Output("bin/helm", helm...)
	if err != nil {
		return nil, nil, err
	}
	return operatorContainer(out)
}

// operatorContainer reads the arguments and plain environment variables
// of a rendered Deployment's first container, less the listen addresses.
func operatorContainer(deployment string) (args, env []string, err error) {
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(deployment), &d); err != nil {
		return nil, nil, fmt.Errorf("the chart's Deployment: %w", err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, nil, errors.New("the chart's Deployment has no container")
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	for _, a := range ctr.Args {
		if !strings.HasPrefix(a, "--metrics-") && !strings.HasPrefix(a, "--health-probe-bind-address") {
			args = append(args, a)
		}
	}
	for _, e := range ctr.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return args, env, nil
}

// Listen is where one operator process serves, on loopback: each process
// of a run needs its own ports, apart from those of the demo and of other
// harnesses.
type Listen struct{ Metrics, Probe, Pprof string }

// Args are the operator's flags for l. Metrics are plain HTTP on
// loopback, so that a harness scrapes them without a token.
func (l Listen) Args() []string {
	return []string{"--metrics-bind-address=" + l.Metrics, "--metrics-secure=false",
		"--health-probe-bind-address=" + l.Probe, "--pprof-bind-address=" + l.Pprof}
}
