package node

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// A driver pod terminating with the digest its DaemonSet's template still
// has restarts in place; one with another digest, or none (made by an
// operator from before digests), unloads its driver. A driver pod that is
// not ready but stays (its container failed) is neither: it gets a short
// outage's grace.
func TestObservePodsTellsARestartInPlace(t *testing.T) {
	const ds, hash = "nvidia-driver-daemonset-ubuntu22.04", "h1"
	driverSet := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: ds, Namespace: fixture.Namespace,
		Labels: map[string]string{render.LabelState: string(state.Driver)}}}
	driverSet.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	driverSet.Spec.Template.Annotations = map[string]string{render.AnnotationTemplateHash: hash}
	pod := func(digest string, terminating bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "driver", Namespace: fixture.Namespace, UID: "u1",
			Labels:          map[string]string{render.LabelState: string(state.Driver)},
			Annotations:     map[string]string{render.AnnotationTemplateHash: digest},
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: ds, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "nvidia-driver-ctr"}}}}
		if digest != "" {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: state.DriverConfigDigestEnv, Value: digest}}
		}
		if terminating {
			p.DeletionTimestamp = ptr.To(metav1.Now())
			p.Finalizers = []string{"test"}
		}
		return p
	}
	tests := map[string]struct {
		pod       corev1.Pod
		unloading bool
		digest    string
	}{
		"terminating, its template's digest": {pod: pod(hash, true), digest: hash},
		"terminating, another digest":        {pod: pod("h0", true), unloading: true},
		"terminating, no digest":             {pod: pod("", true), unloading: true},
		"not ready, staying":                 {pod: pod(hash, false)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(envtest.NewScheme()).WithObjects(driverSet).Build(),
				Pods: podindex.Fixed(t, tt.pod), Namespace: fixture.Namespace, Timers: fixture.Timers()}
			_, unloading, digest, err := r.observePods(context.Background(), "gpu-1", time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(unloading).To(Equal(tt.unloading))
			g.Expect(digest).To(Equal(tt.digest))
		})
	}
}
