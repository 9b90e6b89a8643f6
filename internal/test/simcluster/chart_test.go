package simcluster

import (
	"slices"
	"testing"
)

const renderedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: gpu-operator
spec:
  template:
    spec:
      containers:
      - name: gpu-operator
        args:
        - --leader-elect
        - --metrics-bind-address=:8080
        - --metrics-secure=true
        - --metrics-cert-dir=/var/run/gpu-operator/metrics-certs
        - --health-probe-bind-address=:8081
        - --ready-grace-period=30s
        env:
        - name: OPERATOR_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: GOMEMLIMIT
          value: 200MiB
`

// The local operator runs with the chart's flags and plain environment,
// but listens where the harness says, and takes no value from a pod
// field it does not have.
func TestOperatorContainerLeavesOutListenAddresses(t *testing.T) {
	args, env, err := operatorContainer(renderedDeployment)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--leader-elect", "--ready-grace-period=30s"}; !slices.Equal(args, want) {
		t.Errorf("args = %q, want %q", args, want)
	}
	if want := []string{"GOMEMLIMIT=200MiB"}; !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	if _, _, err := operatorContainer("kind: Deployment\n"); err == nil {
		t.Error("a Deployment without a container was accepted")
	}
}

func TestListenArgsServePlainHTTP(t *testing.T) {
	got := Listen{Metrics: "127.0.0.1:1", Probe: "127.0.0.1:2", Pprof: "127.0.0.1:3"}.Args()
	want := []string{"--metrics-bind-address=127.0.0.1:1", "--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:2", "--pprof-bind-address=127.0.0.1:3"}
	if !slices.Equal(got, want) {
		t.Errorf("args = %q, want %q", got, want)
	}
}
