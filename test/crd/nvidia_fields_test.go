package crd

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// No field of NVIDIA's ClusterPolicy or NVIDIADriver is dropped without a
// word: every leaf path of NVIDIA v26.7.0's CRDs is in ours, typed (acted
// on) or under an accepted-only node (kept, and listed with why in
// status.ignoredFields). A path our structural schema lacks would be
// pruned by the API server on every write, and an NVIDIA user's setting
// would vanish unseen.
func TestEveryNVIDIAFieldIsKeptOrTyped(t *testing.T) {
	for _, c := range []struct{ fields, crd string }{
		{"nvidia-v26.7.0-clusterpolicies-fields.txt", "nvidia.com_clusterpolicies.yaml"},
		{"nvidia-v26.7.0-nvidiadrivers-fields.txt", "nvidia.com_nvidiadrivers.yaml"},
	} {
		root := specSchema(t, c.crd)
		f, err := os.Open(filepath.Join("testdata", c.fields))
		if err != nil {
			t.Fatal(err)
		}
		paths := 0
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			path := scanner.Text()
			if path == "" || strings.HasPrefix(path, "#") {
				continue
			}
			paths++
			if why := dropped(root, path); why != "" {
				t.Errorf("%s: NVIDIA's %s would be dropped by our CRD: %s", c.crd, path, why)
			}
		}
		f.Close()
		if paths < 100 {
			t.Fatalf("%s: only %d paths read", c.fields, paths)
		}
	}
}

// specSchema is the root schema of one of our generated CRDs.
func specSchema(t *testing.T, file string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdschema.RepoRoot(), "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// dropped says why our schema would prune a path, "" when it keeps it.
func dropped(root *apiextensionsv1.JSONSchemaProps, path string) string {
	node := root
	for _, seg := range strings.Split(path, ".") {
		list := strings.HasSuffix(seg, "[]")
		seg = strings.TrimSuffix(seg, "[]")
		if node.XPreserveUnknownFields != nil && *node.XPreserveUnknownFields {
			return "" // accepted as written, listed in ignoredFields
		}
		if node.AdditionalProperties != nil {
			return "" // a map: any key
		}
		next, ok := node.Properties[seg]
		if !ok {
			return "no property " + seg
		}
		node = &next
		if node.XPreserveUnknownFields != nil && *node.XPreserveUnknownFields {
			return ""
		}
		if list {
			if node.Items == nil || node.Items.Schema == nil {
				return seg + " is no list"
			}
			node = node.Items.Schema
		}
	}
	return ""
}

// docs/nvidia-compatibility.md says what each NVIDIA field does here: a
// field it calls refused is one the API accepts without acting on, with
// the reason the status gives; every such field is in the table; a field
// it calls honoured is a typed field of ours.
func TestCompatibilityTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(crdschema.RepoRoot(), "docs", "nvidia-compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := strings.SplitN(string(data), "## NVIDIADriver", 2)
	if len(sections) != 2 {
		t.Fatal("no NVIDIADriver section")
	}
	for i, c := range []struct {
		crd     string
		refused map[string]string
	}{
		{"nvidia.com_clusterpolicies.yaml", gpuv1.AcceptedOnly(reflect.TypeFor[gpuv1.ClusterPolicySpec](), "spec")},
		{"nvidia.com_nvidiadrivers.yaml", gpuv1.AcceptedOnly(reflect.TypeFor[gpuv1alpha1.NVIDIADriverSpec](), "spec")},
	} {
		root := specSchema(t, c.crd)
		listed := map[string]bool{}
		for _, line := range strings.Split(sections[i], "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`spec") {
				continue
			}
			field := strings.Trim(strings.TrimSpace(cells[1]), "`")
			status, why := strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])
			switch status {
			case "refused":
				listed[field] = true
				if want, ok := c.refused[field]; !ok || want != why {
					t.Errorf("%s: %s is refused in the table with %q, the API refuses it with %q", c.crd, field, why, want)
				}
			case "honoured":
				if _, ok := c.refused[field]; ok || dropped(root, "spec."+strings.TrimPrefix(field, "spec.")) != "" || opaque(root, field) {
					t.Errorf("%s: %s is honoured in the table, but not a typed field of ours", c.crd, field)
				}
			default:
				t.Errorf("%s: %s: status %q", c.crd, field, status)
			}
		}
		for field := range c.refused {
			if !listed[field] {
				t.Errorf("%s: %s is refused by the API and missing from the table", c.crd, field)
			}
		}
	}
}

// opaque reports whether a path ends under an accepted-only node.
func opaque(root *apiextensionsv1.JSONSchemaProps, path string) bool {
	node := root
	for _, seg := range strings.Split(path, ".")[1:] {
		next, ok := node.Properties[seg]
		if !ok {
			return false
		}
		node = &next
		if node.XPreserveUnknownFields != nil && *node.XPreserveUnknownFields {
			return true
		}
		if node.Type == "array" && node.Items != nil && node.Items.Schema != nil {
			node = node.Items.Schema
		}
	}
	return false
}
