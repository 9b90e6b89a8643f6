package packaging

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	texttemplate "text/template"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// krewPlugin is what krew reads of a plugin manifest.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct{ Name string }
	Spec       struct {
		Version          string
		Homepage         string
		ShortDescription string `json:"shortDescription"`
		Description      string
		Platforms        []struct {
			Selector struct{ MatchLabels map[string]string } `json:"selector"`
			URI      string                                  `json:"uri"`
			Sha256   string                                  `json:"sha256"`
			Bin      string                                  `json:"bin"`
		}
	}
}

// .krew.yaml, filled in as krew-release-bot fills it at a release, is a
// krew Plugin named gpu whose platforms are those make dist-plugin
// builds, each its archive's URI for the release's tag.
func TestKrewManifest(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(root, ".krew.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := texttemplate.New("krew").Funcs(texttemplate.FuncMap{
		"addURIAndSha": func(uri, tag string) string {
			return "uri: " + strings.ReplaceAll(uri, "{{ .TagName }}", tag) + "\n      sha256: " + strings.Repeat("0", 64)
		},
	}).Parse(string(raw))
	g.Expect(err).NotTo(HaveOccurred())
	var filled bytes.Buffer
	g.Expect(tmpl.Execute(&filled, map[string]string{"TagName": "v0.1.0"})).To(Succeed())
	var p krewPlugin
	g.Expect(yaml.UnmarshalStrict(filled.Bytes(), &p)).To(Succeed(), filled.String())
	g.Expect(p.APIVersion).To(Equal("krew.googlecontainertools.github.com/v1alpha2"))
	g.Expect(p.Kind).To(Equal("Plugin"))
	g.Expect(p.Metadata.Name).To(Equal("gpu"), "kubectl gpu")
	g.Expect(p.Spec.Version).To(Equal("v0.1.0"))

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^PLUGIN_PLATFORMS \?= (.+)$`).FindSubmatch(makefile)
	g.Expect(m).NotTo(BeNil(), "the Makefile's PLUGIN_PLATFORMS")
	var listed []string
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		listed = append(listed, os+"/"+arch)
		g.Expect(pl.URI).To(HaveSuffix("/releases/download/v0.1.0/kubectl-gpu_" + os + "_" + arch + ".tar.gz"))
		g.Expect(pl.Bin).To(Equal("kubectl-gpu"))
	}
	g.Expect(listed).To(ConsistOf(strings.Fields(string(m[1]))))
}
