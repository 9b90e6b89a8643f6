package clusterpolicy

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
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
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
)

// A DaemonSet whose pods read the validated device plugin configurations
// is not applied while the API server refuses those: its new template
// would start pods on the old files. Everything else is, and everything
// is kept from pruning.
func TestReadersWaitForTheValidatedConfigs(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	var applied []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			u := obj.(interface{ GetKind() string })
			if u.GetKind() == "ConfigMap" {
				return errors.New("admission webhook refused it")
			}
			name := obj.(interface{ GetName() string }).GetName()
			applied = append(applied, name)
			return c.Apply(ctx, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, Namespace: "gpu-operator", Applier: &apply.Applier{Client: c, Reader: c, Owner: "test"}}
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "uid-1"}}
	daemonSet := func(name string, volumes ...corev1.Volume) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{TypeMeta: render.TypeMeta("apps/v1", "DaemonSet"),
			ObjectMeta: render.ObjectMeta(cp, name, "gpu-operator", "s"),
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, Volumes: volumes}}}}
	}
	_, _, reads := deviceplugin.ConfigSettings(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{DevicePlugin: gpuv1.DevicePluginSpec{
		Config: &gpuv1.DevicePluginConfig{Name: "sharing"}}}}, "ts-4")
	wanted := []client.Object{
		deviceplugin.ValidatedConfigs(cp, "gpu-operator", map[string]string{"ts-4": "version: v1\n"}),
		daemonSet("plugin", reads...),
		daemonSet("exporter"),
	}
	keep := map[apply.Key]bool{}
	errs := r.applyWanted(context.Background(), wanted, keep, nil)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0]).To(MatchError(ContainSubstring("refused")))
	g.Expect(applied).To(Equal([]string{"exporter"}), "the plugin waits for its files")
	g.Expect(keep).To(HaveLen(3), "nothing of what waits is pruned")
}
