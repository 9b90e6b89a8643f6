package maintenance

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func allocatedBy(name, driver string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}}
	if driver != "" {
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: "n", Device: "gpu-0"}}}}
	}
	return c
}

// podWithClaims is a pod whose claims were made from templates: the spec
// names the templates, the status the claims made.
func podWithClaims(names ...*string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}}
	for i, n := range names {
		entry := string(rune('a' + i))
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: ptr.To("t")})
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: n})
	}
	return p
}

// podSharingClaim is a pod that names a claim it shares with others: the
// status does not list it.
func podSharingClaim(name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "infer"}}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "shared", ResourceClaimName: ptr.To(name)}}
	return p
}

// On a DRA node a pod holds a GPU through a ResourceClaim allocated by
// NVIDIA's driver: such a pod is a GPU pod, which an upgrade, a MIG
// change or a repair evicts before the driver goes. A claim that cannot
// be read counts.
func TestPodsHoldingNVIDIAClaimsAreGPUPods(t *testing.T) {
	objs := []client.Object{allocatedBy("gpu", "gpu.nvidia.com"), allocatedBy("channel", "compute-domain.nvidia.com"),
		allocatedBy("nic", "rdma.example.com"), allocatedBy("pending", "")}
	reader := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	broken := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("the API server refuses")
		}}).Build()
	noV1 := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}, SearchedVersions: []string{"v1"}}
		}}).Build()
	for name, tt := range map[string]struct {
		pod    *corev1.Pod
		reader client.Reader
		want   bool
	}{
		"a GPU claim":                 {pod: podWithClaims(ptr.To("gpu")), reader: reader, want: true},
		"a compute domain's channel":  {pod: podWithClaims(ptr.To("nic"), ptr.To("channel")), reader: reader, want: true},
		"another driver's claim":      {pod: podWithClaims(ptr.To("nic")), reader: reader},
		"a claim not allocated yet":   {pod: podWithClaims(ptr.To("pending")), reader: reader},
		"a claim gone":                {pod: podWithClaims(ptr.To("deleted")), reader: reader},
		"a claim that was not needed": {pod: podWithClaims(nil), reader: broken},
		"a claim that cannot be read": {pod: podWithClaims(ptr.To("gpu")), reader: broken, want: true},
		"no claim":                    {pod: podWithClaims(), reader: broken},
		"a shared GPU claim":          {pod: podSharingClaim("gpu"), reader: reader, want: true},
		"a shared NIC claim":          {pod: podSharingClaim("nic"), reader: reader},
		// A cluster of beta DRA only: the claim may be NVIDIA's standalone
		// driver's, and a driver must not go from under it.
		"no resource.k8s.io/v1": {pod: podWithClaims(ptr.To("gpu")), reader: noV1, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{APIReader: tt.reader, Namespace: "gpu-operator"}
			isGPU := r.gpuPods(context.Background(), &gpuv1.ClusterPolicy{}, nil, false)
			NewWithT(t).Expect(isGPU(tt.pod)).To(Equal(tt.want))
		})
	}
}
