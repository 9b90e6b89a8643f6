package kubectlgpu

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// The plugin takes kubectl's flags and its own, and refuses an output
// format it does not print, naming the flag.
func TestCommandFlags(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	cmd := NewCommand(&out)
	for _, flag := range []string{"kubeconfig", "context", "cluster", "namespace", "output"} {
		g.Expect(cmd.PersistentFlags().Lookup(flag)).NotTo(BeNil(), flag)
	}
	g.Expect(cmd.Commands()).To(ContainElements(HaveField("Use", "status"), HaveField("Use", "why NODE")))

	o := &options{config: genericclioptions.NewConfigFlags(true), output: "yaml", out: &out}
	g.Expect(o.print(nil)).To(MatchError(ContainSubstring("--output: want json")))
	o.output = ""
	g.Expect(o.namespace()).To(Equal("gpu-operator"), "the chart's, unless -n says otherwise")
	*o.config.Namespace = "gpu"
	g.Expect(o.namespace()).To(Equal("gpu"))
}
