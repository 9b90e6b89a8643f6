package clusterpolicy

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// applying is a Reconciler on a fake API server that records the names of
// the objects it applies; refuse, when it returns an error for a kind,
// has the server refuse that kind's applies.
func applying(t *testing.T, refuse func(kind string) error) (*Reconciler, *[]string) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	applied := &[]string{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if refuse != nil {
				if err := refuse(obj.(interface{ GetKind() string }).GetKind()); err != nil {
					return err
				}
			}
			*applied = append(*applied, obj.(interface{ GetName() string }).GetName())
			return c.Apply(ctx, obj, opts...)
		},
	}).Build()
	return &Reconciler{Client: c, Namespace: "gpu-operator", Applier: &apply.Applier{Client: c, Reader: c, Owner: "test"}}, applied
}

// testPolicy is the policy the rendered objects name as their owner.
var testPolicy = &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "uid-1"}}

// testDaemonSet is a rendered DaemonSet of a state, with volumes.
func testDaemonSet(name, st string, volumes ...corev1.Volume) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{TypeMeta: render.TypeMeta("apps/v1", "DaemonSet"),
		ObjectMeta: render.ObjectMeta(testPolicy, name, "gpu-operator", st),
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, Volumes: volumes}}}}
}
