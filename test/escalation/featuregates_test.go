package escalation

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/apifeatures"
	"github.com/gpu-operator/gpu-operator/internal/test/operatorrbac"
)

// The operator reads the API server's DRADeviceTaints gate with its own
// role (get on /metrics) from the kubernetes_feature_enabled metric, which
// this API server (v1.37, the gate on by default) lists; an operand's
// token reads nothing there.
func TestOperatorReadsTheAPIServersFeatureGates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rules, _, err := operatorrbac.Rules()
	g.Expect(err).NotTo(HaveOccurred())
	applyNamespaces(t, ctx)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalation-test:gpu-operator-gates"}, Rules: rules}
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, role))).To(Succeed())
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: namespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}))).To(Succeed())

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
