package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The OLM bundle carries the generated CRDs byte for byte, the version, the
// RBAC of role.yaml, and the default sample as its alm-examples.
func TestBundle(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", "gpu-operator.clusterserviceversion.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), "run make bundle")
	csv := struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Version        string `json:"version"`
			MinKubeVersion string `json:"minKubeVersion"`
			CRDs           struct {
				Owned []struct {
					Name        string `json:"name"`
					Description string `json:"description"`
				} `json:"owned"`
			} `json:"customresourcedefinitions"`
			Install struct {
				Strategy string `json:"strategy"`
				Spec     struct {
					Deployments []struct {
						Name string `json:"name"`
					} `json:"deployments"`
					Permissions []struct {
						Rules []rbacv1.PolicyRule `json:"rules"`
					} `json:"permissions"`
					ClusterPermissions []struct {
						Rules []rbacv1.PolicyRule `json:"rules"`
					} `json:"clusterPermissions"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}{}
	g.Expect(yaml.Unmarshal(data, &csv)).To(Succeed())
	g.Expect(csv.Metadata.Name).To(Equal("gpu-operator.v" + version(t)))
	g.Expect(csv.Spec.Version).To(Equal(version(t)))
	g.Expect(csv.Spec.MinKubeVersion).NotTo(BeEmpty())
	g.Expect(csv.Spec.Install.Strategy).To(Equal("deployment"))
	g.Expect(csv.Spec.Install.Spec.Deployments).To(HaveLen(1))

	// alm-examples is the default sample.
	sample, err := os.ReadFile(filepath.Join(root, "config", "samples", "nvidia_v1_clusterpolicy.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var want map[string]any
	g.Expect(yaml.Unmarshal(sample, &want)).To(Succeed())
	var examples []map[string]any
	g.Expect(json.Unmarshal([]byte(csv.Metadata.Annotations["alm-examples"]), &examples)).To(Succeed())
	g.Expect(examples).To(Equal([]map[string]any{want}))

	// The permissions are role.yaml's.
	role, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var cluster, namespaced []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(role), "\n---\n") {
		r := rbacv1.ClusterRole{}
		g.Expect(yaml.Unmarshal([]byte(doc), &r)).To(Succeed())
		if r.Kind == "ClusterRole" {
			cluster = r.Rules
		} else if r.Kind == "Role" {
			namespaced = r.Rules
		}
	}
	g.Expect(csv.Spec.Install.Spec.ClusterPermissions[0].Rules).To(Equal(cluster))
	g.Expect(csv.Spec.Install.Spec.Permissions[0].Rules).To(Equal(namespaced))

	// Every CRD is owned, described, and byte-identical to the generated one.
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "*", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(csv.Spec.CRDs.Owned).To(HaveLen(len(files)))
	for _, o := range csv.Spec.CRDs.Owned {
		g.Expect(o.Description).NotTo(BeEmpty(), o.Name)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", filepath.Base(f)))
		g.Expect(err).NotTo(HaveOccurred(), "run make bundle")
		g.Expect(got).To(Equal(want), "bundle/manifests/%s differs from %s: run make bundle", filepath.Base(f), f)
	}
}
