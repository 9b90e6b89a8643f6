package upgrade

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// daemonsets.labels and daemonsets.annotations reach the running driver
// pods, which only an upgrade replaces, without replacing them or starting
// an upgrade. (The pods of rolling DaemonSets are made again with them by
// the DaemonSet controller.)
func TestDaemonsetsMetadataReachesRunningDriverPods(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	f.ExpectAllReady(f.Nodes...)
	deletions := f.RecordDriverDeletions()
	log := f.RecordUpgrades()
	running := map[string]types.UID{}
	for _, n := range f.Nodes {
		running[n] = f.PodOn(n, "driver").UID
	}

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "ml"}
		cp.Spec.Daemonsets.Annotations = gpuv1.Annotations{"example.com/owner": "infra"}
	})
	for _, n := range f.Nodes {
		g.Eventually(func() *corev1.Pod { return f.PodOn(n, "driver") }, controllertest.Timeout, controllertest.Interval).Should(And(
			Not(BeNil()),
			HaveField("Labels", HaveKeyWithValue("team", "ml")),
			HaveField("Labels", HaveKeyWithValue("app", "nvidia-driver-daemonset")),
			HaveField("Annotations", HaveKeyWithValue("example.com/owner", "infra"))), "node %s", n)
		g.Expect(f.PodOn(n, "driver").UID).To(Equal(running[n]), "node %s: the running driver pod, not a new one", n)
	}
	f.ExpectAllReady(f.Nodes...)
	f.AfterMaintenancePasses()
	count, breaches := deletions.Results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(BeZero(), "no driver replaced for its metadata")
	for _, n := range f.Nodes {
		g.Expect(log.Sequence(n)).To(BeEmpty(), "node %s entered an upgrade", n)
	}
}
