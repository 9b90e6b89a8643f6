package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-operator/gpu-operator/internal/test/operatorrbac"
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
				Required []struct {
					Name string `json:"name"`
				} `json:"required"`
			} `json:"customresourcedefinitions"`
			RelatedImages []struct {
				Image string `json:"image"`
			} `json:"relatedImages"`
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
	cluster, namespaced, err := operatorrbac.Rules()
	g.Expect(err).NotTo(HaveOccurred())
	// But for the bind of the operands' ClusterRoles: OLM binds them, from
	// the clusterPermissions below, and the operator is told so.
	bind := slices.IndexFunc(cluster, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "bind") })
	g.Expect(bind).NotTo(Equal(-1), "role.yaml binds the operands' ClusterRoles")
	g.Expect(csv.Spec.Install.Spec.ClusterPermissions[0].Rules).To(Equal(slices.Delete(slices.Clone(cluster), bind, bind+1)))
	g.Expect(csv.Spec.Install.Spec.Permissions[0].Rules).To(Equal(namespaced))
	g.Expect(string(data)).To(ContainSubstring("- --bind-operand-cluster-roles=false"))

	// The operator's CRDs and the DRA driver's ComputeDomain CRDs are
	// owned, described, and byte-identical to the generated ones; NFD's are
	// required from the NFD Operator, which owns them, and not shipped: two
	// CSVs cannot own one CRD.
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	dra, err := filepath.Glob(filepath.Join(root, "config", "crd", "dra", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dra).To(HaveLen(2), "config/crd/dra: run make manifests")
	files = append(files, dra...)
	g.Expect(csv.Spec.CRDs.Owned).To(HaveLen(len(files)))
	g.Expect(csv.Spec.CRDs.Owned).To(ContainElements(HaveField("Name", "computedomains.resource.nvidia.com"),
		HaveField("Name", "computedomaincliques.resource.nvidia.com")))
	g.Expect(csv.Spec.CRDs.Required).To(ConsistOf(HaveField("Name", "nodefeatures.nfd.k8s-sigs.io"),
		HaveField("Name", "nodefeaturerules.nfd.k8s-sigs.io"), HaveField("Name", "nodefeaturegroups.nfd.k8s-sigs.io")))
	shipped, err := filepath.Glob(filepath.Join(root, "bundle", "manifests", "nfd.*"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shipped).To(BeEmpty())
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

// A disconnected cluster mirrors what relatedImages lists: the operator and
// every image its default ClusterPolicy runs, as the golden renders show.
func TestBundleRelatedImages(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", "gpu-operator.clusterserviceversion.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var csv struct {
		Spec struct {
			RelatedImages []struct {
				Image string `json:"image"`
			} `json:"relatedImages"`
		} `json:"spec"`
	}
	g.Expect(yaml.Unmarshal(data, &csv)).To(Succeed())
	var related []string
	for _, r := range csv.Spec.RelatedImages {
		related = append(related, r.Image)
	}
	g.Expect(related).To(ContainElement("ghcr.io/gpu-operator/gpu-operator:v" + version(t)))
	goldens, err := filepath.Glob(filepath.Join(root, "internal", "state", "registry", "testdata", "default", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	seen := 0
	for _, f := range goldens {
		content, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(content), "\n") {
			if img, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
				seen++
				g.Expect(related).To(ContainElement(img), "%s runs %s", filepath.Base(f), img)
			}
		}
	}
	g.Expect(seen).To(BeNumerically(">", 5))
}

// bundle.Dockerfile labels the image as bundle/metadata/annotations.yaml
// says, and copies both directories.
func TestBundleDockerfile(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, "bundle", "metadata", "annotations.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	g.Expect(yaml.Unmarshal(data, &meta)).To(Succeed())
	df, err := os.ReadFile(filepath.Join(root, "bundle.Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred(), "run make bundle")
	labels := map[string]string{}
	for _, line := range strings.Split(string(df), "\n") {
		if kv, ok := strings.CutPrefix(line, "LABEL "); ok {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = v
		}
	}
	g.Expect(labels).To(Equal(meta.Annotations))
	g.Expect(string(df)).To(ContainSubstring("COPY bundle/manifests /manifests/"))
	g.Expect(string(df)).To(ContainSubstring("COPY bundle/metadata /metadata/"))
}
