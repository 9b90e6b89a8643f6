package v1beta1

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// generatedDir is where `make manifests` writes the CRDs of these types.
const generatedDir = "../../../config/crd/dra"

// The CRDs controller-gen generates from these types are the DRA driver's
// at the commit the operator deploys (kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046, v0.5.0; testdata/ names each file's source), in everything but
// the descriptions, which are ours, and controller-gen's version
// annotation: the same names, scope, versions, subresources, printer
// columns, schema, defaults, enums and CEL rules. No difference is needed,
// so none is allowed.
//
// NVIDIA's gpu-operator v26.7.0 ships the same computedomaincliques CRD,
// and the driver's older (v25.12.0) computedomains CRD, in which
// spec.numNodes is required. The driver it deploys treats the field as
// optional (default 0, minimum 0), and so does the CRD shipped here: a
// ComputeDomain NVIDIA's CRD accepts is accepted here too.
func TestCRDsAreTheDriversOwn(t *testing.T) {
	ours, err := filepath.Glob(filepath.Join(generatedDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Expect(baseNames(ours)).To(Equal(baseNames(theirs)),
		"%s holds a CRD for each of NVIDIA's in testdata/, and no other: run make manifests", generatedDir)

	for _, name := range baseNames(theirs) {
		t.Run(name, func(t *testing.T) {
			got := load(t, filepath.Join(generatedDir, name))
			want := load(t, filepath.Join("testdata", name))
			if diff := diff(want, got); diff != "" {
				t.Errorf("%s/%s is not NVIDIA's CRD (descriptions and the controller-gen version aside);"+
					" - NVIDIA's, + ours:\n%s", generatedDir, name, diff)
			}
		})
	}
}

// The comparison ignores descriptions, and only descriptions: a schema
// property named "description" is kept.
func TestStripDescriptions(t *testing.T) {
	g := NewWithT(t)
	crd := map[string]any{
		"description": "x",
		"properties": map[string]any{
			"description": map[string]any{"type": "string", "description": "x"},
			"properties":  map[string]any{"type": "object", "description": "x"},
		},
		"additionalPrinterColumns": []any{map[string]any{"name": "Age", "description": "x"}},
	}
	stripDescriptions(crd, false)
	g.Expect(crd).To(Equal(map[string]any{
		"properties": map[string]any{
			"description": map[string]any{"type": "string"},
			"properties":  map[string]any{"type": "object"},
		},
		"additionalPrinterColumns": []any{map[string]any{"name": "Age"}},
	}))
}

// load reads one CRD, without its descriptions and controller-gen's
// version annotation.
func load(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if docs := strings.Count("\n"+string(data), "\n---"); docs > 1 {
		t.Fatalf("%s: %d YAML documents, want one CRD", path, docs)
	}
	crd := map[string]any{}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	if crd["kind"] != "CustomResourceDefinition" {
		t.Fatalf("%s: kind %v, want CustomResourceDefinition", path, crd["kind"])
	}
	stripDescriptions(crd, false)
	if meta, ok := crd["metadata"].(map[string]any); ok {
		if annotations, ok := meta["annotations"].(map[string]any); ok {
			delete(annotations, "controller-gen.kubebuilder.io/version")
			if len(annotations) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	return crd
}

// stripDescriptions deletes every "description" field below v, except
// where v is a schema's properties, whose keys are field names.
func stripDescriptions(v any, properties bool) {
	switch v := v.(type) {
	case map[string]any:
		if !properties {
			delete(v, "description")
		}
		for k, child := range v {
			stripDescriptions(child, !properties && k == "properties")
		}
	case []any:
		for _, child := range v {
			stripDescriptions(child, false)
		}
	}
}

// diff lists, one leaf a line, what only want has (-) and what only got
// has (+); empty when they are equal.
func diff(want, got map[string]any) string {
	w, g := map[string]bool{}, map[string]bool{}
	flatten("", want, w)
	flatten("", got, g)
	var lines []string
	for l := range w {
		if !g[l] {
			lines = append(lines, "- "+l)
		}
	}
	for l := range g {
		if !w[l] {
			lines = append(lines, "+ "+l)
		}
	}
	// By path, NVIDIA's line before ours.
	sort.Slice(lines, func(i, j int) bool {
		if lines[i][2:] != lines[j][2:] {
			return lines[i][2:] < lines[j][2:]
		}
		return lines[i] < lines[j]
	})
	return strings.Join(lines, "\n")
}

// flatten adds a "path = value" line for each leaf of v; an empty map or
// list is a leaf.
func flatten(path string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			out[path+" = {}"] = true
		}
		for k, child := range v {
			flatten(path+"."+k, child, out)
		}
	case []any:
		if len(v) == 0 {
			out[path+" = []"] = true
		}
		for i, child := range v {
			flatten(fmt.Sprintf("%s[%d]", path, i), child, out)
		}
	default:
		value, _ := json.Marshal(v)
		out[path+" = "+string(value)] = true
	}
}

func baseNames(paths []string) []string {
	names := make([]string, 0, len(paths))
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	slices.Sort(names)
	return names
}
