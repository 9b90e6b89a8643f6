package escalation

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/discovery"

	"github.com/gpu-operator/gpu-operator/internal/apifeatures"
)

// The operator reads the API server's DRADeviceTaints gate with its own
// role (get on /metrics) from the kubernetes_feature_enabled metric, which
// this API server (v1.37, the gate on by default) lists; an operand's
// token reads nothing there.
func TestOperatorReadsTheAPIServersFeatureGates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyNamespaces(t, ctx)
	installOperatorRole(t, ctx)

	read := func(sa string) (bool, error) {
		c, err := discovery.NewDiscoveryClientForConfig(impersonated(namespace, sa, sa+"-5d4f8", "control-plane-1"))
		g.Expect(err).NotTo(HaveOccurred())
		return apifeatures.GateEnabled(ctx, c.RESTClient(), apifeatures.DRADeviceTaints)
	}
	g.Eventually(func() error { _, err := read("gpu-operator"); return err }).Should(Succeed(), "RBAC takes a moment to see the binding")
	on, err := read("gpu-operator")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeTrue())
	_, err = read("nvidia-device-plugin")
	g.Expect(err).To(MatchError(ContainSubstring("forbidden")))
}
