package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-operator/gpu-operator/internal/test/operatorrbac"
)

const (
	packageName    = "gpu-operator"
	channel        = "stable"
	minKubeVersion = "1.30.0"
	image          = "ghcr.io/gpu-operator/gpu-operator"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if err := run(root); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	version, err := readVersion(root)
	if err != nil {
		return err
	}
	crds, err := readCRDs(root)
	if err != nil {
		return err
	}
	csv, err := clusterServiceVersion(root, version, crds)
	if err != nil {
		return err
	}
	annotations := map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         packageName,
		"operators.operatorframework.io.bundle.channels.v1":        channel,
		"operators.operatorframework.io.bundle.channel.default.v1": channel,
	}
	out := filepath.Join(root, "bundle")
	if err := os.RemoveAll(filepath.Join(out, "manifests")); err != nil {
		return err
	}
	files := map[string]any{
		"manifests/" + packageName + ".clusterserviceversion.yaml": csv,
		"metadata/annotations.yaml":                                map[string]any{"annotations": annotations},
	}
	for _, crd := range crds {
		if owned(crd.crd) {
			files["manifests/"+crd.file] = crd.raw // NFD's are the NFD Operator's
		}
	}
	reader, err := os.ReadFile(filepath.Join(root, "config/rbac/metrics_reader_role.yaml"))
	if err != nil {
		return err
	}
	files["manifests/gpu-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"] = reader
	if err := write(filepath.Join(root, "bundle.Dockerfile"), []byte(dockerfile(annotations))); err != nil {
		return err
	}
	for name, content := range files {
		if err := write(filepath.Join(out, name), content); err != nil {
			return err
		}
	}
	return nil
}

func write(path string, content any) error {
	var data []byte
	switch c := content.(type) {
	case []byte:
		data = c
	default:
		var err error
		if data, err = yaml.Marshal(c); err != nil {
			return fmt.Errorf("encoding %s: %w", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readVersion(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("reading VERSION: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// crdFile is one CRD as generated, kept byte for byte in the bundle.
type crdFile struct {
	file string
	raw  []byte
	crd  apiextensionsv1.CustomResourceDefinition
}

func readCRDs(root string) ([]crdFile, error) {
	var paths []string
	for _, dir := range []string{"config/crd/bases", "config/crd/nfd", "config/crd/dra"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	var out []crdFile
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f := crdFile{file: filepath.Base(p), raw: raw}
		if err := yaml.Unmarshal(raw, &f.crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// rbac reads the generated role.yaml: the ClusterRole's rules become the
// CSV's clusterPermissions and the Role's its permissions. OLM binds the
// operands' ClusterRoles, under names of its own: the operator's bind rule
// names the chart's, and goes.
func rbac(root string) (cluster, namespaced []rbacv1.PolicyRule, err error) {
	cluster, namespaced, err = operatorrbac.RulesIn(root)
	if err != nil {
		return nil, nil, err
	}
	cluster = slices.DeleteFunc(cluster, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.Verbs, []string{"bind"}) && slices.Equal(r.Resources, []string{"clusterroles"})
	})
	return cluster, namespaced, nil
}

func deployment(root, version string) (appsv1.DeploymentSpec, error) {
	data, err := os.ReadFile(filepath.Join(root, "config/manager/manager.yaml"))
	if err != nil {
		return appsv1.DeploymentSpec{}, err
	}
	d := appsv1.Deployment{}
	if err := yaml.Unmarshal(data, &d); err != nil {
		return appsv1.DeploymentSpec{}, fmt.Errorf("decoding config/manager/manager.yaml: %w", err)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Image = fmt.Sprintf("%s:v%s", image, version)
	// OLM binds the operands' ClusterRoles itself, from clusterPermissions,
	// under names of its own: the operator binds none.
	c.Args = append(c.Args, "--bind-operand-cluster-roles=false")
	return d.Spec, nil
}

func almExamples(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "config/samples/nvidia_v1_clusterpolicy.yaml"))
	if err != nil {
		return "", err
	}
	sample := map[string]any{}
	if err := yaml.Unmarshal(data, &sample); err != nil {
		return "", err
	}
	examples, err := json.Marshal([]any{sample})
	return string(examples), err
}

// dockerfile builds the bundle image, labelled as bundle/metadata says:
// OLM reads the labels of the image, the files of the directory.
func dockerfile(annotations map[string]string) string {
	var b strings.Builder
	b.WriteString("# Generated by 'make bundle'. Build with: docker build -f bundle.Dockerfile -t <registry>/gpu-operator-bundle:v<VERSION> .\n")
	b.WriteString("FROM scratch\n")
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, annotations[k])
	}
	b.WriteString("COPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\n")
	return b.String()
}
