package packaging

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// Paths every test uses.
var (
	root      = crdschema.RepoRoot()
	chartPath = filepath.Join(root, "deployments", "gpu-operator")
	helmPath  = filepath.Join(root, "bin", "helm")
)

// helm runs the project's helm with args and returns its stdout; stderr is
// in the error.
func helm(args ...string) (string, error) {
	if _, err := os.Stat(helmPath); err != nil {
		return "", fmt.Errorf("no helm in bin/: run `make tools` (or `make test`) to build it: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmPath, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// serviceMonitorAPI tells helm template that the cluster serves
// ServiceMonitors, as a cluster with the Prometheus Operator does.
var serviceMonitorAPI = []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}

// template renders the chart as the README's install command does, on a
// cluster that serves ServiceMonitors, with extra arguments, and decodes
// every object.
func template(t *testing.T, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", "gpu-operator", chartPath, "-n", "gpu-operator"}, serviceMonitorAPI...)
	args = append(args, extra...)
	out, err := helm(args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func decode(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding the rendered chart: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		m[o.GetKind()]++
	}
	return m
}
