package clusterpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
)

// dcgmExporter.config's metrics list: its digest follows the content;
// a ConfigMap missing, or without the key, is a problem that names the
// field and the fix, and holds the exporters as they are.
func TestDCGMMetrics(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator"}, Data: data}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cm("metrics", map[string]string{dcgmexporter.MetricsKey: "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization.\n"}),
		cm("metrics-2", map[string]string{dcgmexporter.MetricsKey: "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw.\n"}),
		cm("wrong-key", map[string]string{"metrics.csv": "x"})).Build()
	r := &Reconciler{Client: c, Namespace: "gpu-operator"}
	policy := func(name string) *gpuv1.ClusterPolicy {
		cp := &gpuv1.ClusterPolicy{}
		cp.Spec.DCGMExporter.Config = &gpuv1.DCGMExporterMetricsConfig{Name: name}
		return cp
	}
	ctx := context.Background()

	digest, problem, err := r.dcgmMetrics(ctx, policy(""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problem).To(BeNil())
	g.Expect(digest).To(BeEmpty(), "no list named: the image's own, no digest")

	one, problem, err := r.dcgmMetrics(ctx, policy("metrics"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problem).To(BeNil())
	g.Expect(one).To(HaveLen(16))
	two, _, _ := r.dcgmMetrics(ctx, policy("metrics-2"))
	g.Expect(two).NotTo(Equal(one), "another content, another digest")

	_, problem, err = r.dcgmMetrics(ctx, policy("gone"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problem).To(MatchError(And(ContainSubstring("dcgmExporter.config.name"), ContainSubstring("gone"),
		ContainSubstring("does not exist"), ContainSubstring("the exporters stay as they are"))))

	_, problem, _ = r.dcgmMetrics(ctx, policy("wrong-key"))
	g.Expect(problem).To(MatchError(ContainSubstring("has no key dcgm-metrics.csv")))

	disabled := policy("gone")
	disabled.Spec.DCGMExporter.Enabled = new(bool)
	_, problem, _ = r.dcgmMetrics(ctx, disabled)
	g.Expect(problem).To(BeNil(), "a disabled exporter needs no list")
}

// While its metrics list cannot be read, dcgm-exporter's DaemonSets stay
// as they are: not applied, and not pruned; everything else is applied.
func TestExporterHeldWhileItsMetricsListIsMissing(t *testing.T) {
	g := NewWithT(t)
	r, applied := applying(t, nil)
	keep := map[apply.Key]bool{}
	_, errs := r.applyWanted(context.Background(), []client.Object{testDaemonSet("nvidia-dcgm-exporter", string(state.DCGMExporter)),
		testDaemonSet("gpu-feature-discovery", string(state.GPUFeatureDiscovery))}, keep, isExporterDaemonSet)
	g.Expect(errs).To(BeEmpty())
	g.Expect(*applied).To(Equal([]string{"gpu-feature-discovery"}))
	g.Expect(keep).To(HaveLen(2), "the held exporter is kept from pruning")
}
