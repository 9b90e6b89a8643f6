package toolkit

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// The toolkit's variables whose values the operator reads to mount the
// runtime's files (moved) cannot come from a Secret, which the operator
// never reads: the CRD's rule on spec.toolkit names every one of them.
// A variable added to the runtimes' table without the rule would mount
// the defaults while the container reads the Secret's paths.
func TestReadVariablesTakeValuesOnly(t *testing.T) {
	g := NewWithT(t)
	rules, err := crdschema.Rules("spec.toolkit")
	g.Expect(err).NotTo(HaveOccurred())
	i := slices.IndexFunc(rules, func(r string) bool { return strings.Contains(r, "valueFrom") })
	g.Expect(i).NotTo(Equal(-1), "spec.toolkit has the valueFrom rule")
	var named []string
	for _, m := range regexp.MustCompile(`'([A-Z_]+)'`).FindAllStringSubmatch(rules[i], -1) {
		named = append(named, m[1])
	}
	var read []string
	for _, host := range runtimes {
		for _, list := range [][]string{host.configEnv, host.socketEnv, host.hooksEnv, host.dropInEnv} {
			read = append(read, list...)
		}
	}
	read = append(read, envDropInHostPath, envConfigSource, envConfigSources, envNRISocket)
	slices.Sort(read)
	read = slices.Compact(read)
	for _, name := range read {
		g.Expect(moved(name)).To(BeTrue(), name)
	}
	g.Expect(named).To(ConsistOf(read))

	rules, err = crdschema.Rules("spec.devicePlugin")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules).To(ContainElement(And(ContainSubstring("valueFrom"), ContainSubstring("'"+state.EnvDeviceListStrategy+"'"))),
		"DeviceListStrategy reads the device plugin's %s", state.EnvDeviceListStrategy)
}
