package crd

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Every object every state renders passes the API server's own validation
// (pod specs, Services, RBAC, RuntimeClasses), checked with a server-side
// dry run so nothing is stored.
func TestRenderedObjectsPassServerValidation(t *testing.T) {
	policies, err := fixture.Policies()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for caseName, cp := range policies {
		count += renderAndDryRun(t, caseName, cp)
	}
	t.Logf("%d rendered objects passed a server-side dry run", count)
}

// renderAndDryRun renders every state of a policy, for a mixed-OS cluster
// of every node variant, and dry-runs each object on the API server. It
// returns how many objects passed; kinds the server does not serve
// (ServiceMonitor) are skipped.
func renderAndDryRun(t *testing.T, caseName string, cp *gpuv1.ClusterPolicy) int {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fixture.Namespace}}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, s := range graph.States() {
		if !s.Operand.Enabled(&cp.Spec) {
			continue
		}
		objs, err := s.Operand.Render(state.RenderInput{
			Policy: cp, Namespace: fixture.Namespace, Gate: graph.Gate(s.Name), DriverPools: fixture.DriverPools(cp),
			Variants: fixture.Variants(cp),
		})
		if err != nil {
			t.Fatalf("%s/%s: %v", caseName, s.Name, err)
		}
		for _, o := range objs {
			t.Run(caseName+"/"+string(s.Name)+"/"+o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName(), func(t *testing.T) {
				err := k8sClient.Create(ctx, o, client.DryRunAll)
				if meta.IsNoMatchError(err) {
					t.Skipf("%s is not served here", o.GetObjectKind().GroupVersionKind().Kind)
				}
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
			})
			count++
		}
	}
	return count
}
