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

// dcgmExporter.config's metrics list: the named ConfigMap's while the
// exporter can read it; a ConfigMap missing, without the key, or with a
// list the exporter would refuse is a problem that names the field and the
// fix, and the exporters run the last good list the operator kept, or,
// with none kept, stay as they are.
func TestDCGMMetrics(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator"}, Data: data}
	}
	const good = "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization.\n"
	objs := []client.Object{
		cm("metrics", map[string]string{dcgmexporter.MetricsKey: good}),
		cm("wrong-key", map[string]string{"metrics.csv": "x"}),
		cm("broken", map[string]string{dcgmexporter.MetricsKey: "DCGM_FI_DEV_GPU_UTIL gauge\n"}),
	}
	policy := func(name string) *gpuv1.ClusterPolicy {
		cp := &gpuv1.ClusterPolicy{}
		cp.Spec.DCGMExporter.Config = &gpuv1.DCGMExporterMetricsConfig{Name: name}
		return cp
	}
	ctx := context.Background()
	for _, kept := range []string{"", "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw.\n"} {
		all := objs
		if kept != "" {
			all = append(all, cm(dcgmexporter.MetricsCopy, map[string]string{dcgmexporter.MetricsKey: kept}))
		}
		r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(all...).Build(), Namespace: "gpu-operator"}

		list, problem, err := r.dcgmMetrics(ctx, policy(""))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problem).To(BeNil())
		g.Expect(list).To(BeEmpty(), "no list named: the image's own")

		list, problem, err = r.dcgmMetrics(ctx, policy("metrics"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problem).To(BeNil())
		g.Expect(list).To(Equal(good), "the named list, whatever the copy holds")

		then := "the exporters stay as they are"
		if kept != "" {
			then = "the exporters run its last good list, kept in ConfigMap " + dcgmexporter.MetricsCopy
		}
		for name, why := range map[string]string{"gone": "does not exist", "wrong-key": "has no key dcgm-metrics.csv",
			"broken": "dcgm-exporter would refuse at start: record 1"} {
			list, problem, err = r.dcgmMetrics(ctx, policy(name))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(problem).To(MatchError(And(ContainSubstring("dcgmExporter.config.name"), ContainSubstring(name),
				ContainSubstring(why), ContainSubstring(then))), "%s, kept %q", name, kept)
			g.Expect(list).To(Equal(kept), "%s: the last good list, if any", name)
		}
	}

	disabled := policy("gone")
	disabled.Spec.DCGMExporter.Enabled = new(bool)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), Namespace: "gpu-operator"}
	_, problem, _ := r.dcgmMetrics(ctx, disabled)
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
