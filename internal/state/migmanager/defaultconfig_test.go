package migmanager

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

// The default file parses as mig-parted reads it, holds NVIDIA's names
// for the single-profile layouts of the H100 80GB and H200 141GB, and
// every configuration in it can be advertised under either strategy.
func TestDefaultConfig(t *testing.T) {
	g := NewWithT(t)
	f, err := migconfig.Parse(DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Names()).To(ContainElements("all-disabled", "all-enabled", "all-1g.10gb", "all-7g.80gb", "all-1g.18gb", "all-7g.141gb"))
	for _, name := range f.Names() {
		l, err := f.LayoutOf(name, 8)
		g.Expect(err).NotTo(HaveOccurred())
		for _, strategy := range []string{"single", "mixed"} {
			_, err := l.Resources(strategy)
			g.Expect(err).NotTo(HaveOccurred(), "%s under %s", name, strategy)
		}
	}
	l, _ := f.LayoutOf("all-1g.18gb", 8)
	g.Expect(l.MIGDevices).To(Equal(map[string]int{"1g.18gb": 56}))
}
