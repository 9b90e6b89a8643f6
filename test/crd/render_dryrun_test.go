package crd

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Every object every state renders passes the API server's own validation
// (pod specs, Services, RBAC, RuntimeClasses), checked with a server-side
// dry run so nothing is stored.
func TestRenderedObjectsPassServerValidation(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fixture.Namespace}}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	policies, err := fixture.Policies()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for caseName, cp := range policies {
		for _, s := range graph.States() {
			objs, err := s.Operand.Render(state.RenderInput{
				Policy: cp, Namespace: fixture.Namespace, Gate: graph.Gate(s.Name), DriverPools: fixture.DriverPools(cp),
				Variants: fixture.Variants(cp),
			})
			if err != nil {
				t.Fatalf("%s/%s: %v", caseName, s.Name, err)
			}
			for _, o := range objs {
				t.Run(caseName+"/"+string(s.Name)+"/"+o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName(), func(t *testing.T) {
					NewWithT(t).Expect(k8sClient.Create(ctx, o, client.DryRunAll)).To(Succeed())
				})
				count++
			}
		}
	}
	t.Logf("%d rendered objects passed a server-side dry run", count)
}
