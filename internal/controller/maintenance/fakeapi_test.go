package maintenance

import (
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// driverPolicy is cluster-policy as the API server defaults it, with the
// driver on.
func driverPolicy(g Gomega) *gpuv1.ClusterPolicy {
	cp, err := crdschema.Defaulted(&gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"}})
	g.Expect(err).NotTo(HaveOccurred())
	cp.Spec.Driver.Enabled = ptr.To(true)
	return cp
}

// fakeAPI is a fake API server holding objs, with the pods' spec.nodeName
// index the controller lists a node's pods by.
func fakeAPI(objs ...client.Object) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithScheme(envtest.NewScheme()).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} })
}
