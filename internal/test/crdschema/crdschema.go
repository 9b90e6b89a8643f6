package crdschema

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Path is the generated ClusterPolicy CRD, relative to the repository root.
const Path = "config/crd/bases/nvidia.com_clusterpolicies.yaml"

// RepoRoot returns the repository root, found from this file's location so
// that tests in any package can use it.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Load reads and decodes the generated ClusterPolicy CRD.
func Load() (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), Path))
	if err != nil {
		return nil, fmt.Errorf("reading the ClusterPolicy CRD (run make manifests): %w", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", Path, err)
	}
	return crd, nil
}

// Property returns the schema of a dotted path such as "spec.driver.version"
// in the first version of the CRD.
func Property(crd *apiextensionsv1.CustomResourceDefinition, path string) (*apiextensionsv1.JSONSchemaProps, error) {
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, name := range strings.Split(path, ".") {
		child, ok := schema.Properties[name]
		if !ok {
			return nil, fmt.Errorf("no property %q on the way to %s", name, path)
		}
		schema = &child
	}
	return schema, nil
}

// Rules returns the CEL rules of the schema at path.
func Rules(path string) ([]string, error) {
	crd, err := Load()
	if err != nil {
		return nil, err
	}
	schema, err := Property(crd, path)
	if err != nil {
		return nil, err
	}
	rules := make([]string, 0, len(schema.XValidations))
	for _, v := range schema.XValidations {
		rules = append(rules, v.Rule)
	}
	return rules, nil
}
