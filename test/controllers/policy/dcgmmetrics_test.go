package policy

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// dcgm-exporter runs the operator's copy of dcgmExporter.config's metrics
// list. Edited into a list the exporter would refuse, then deleted, the
// user's ConfigMap leaves the exporters on the last good list (an exporter
// pod made again still starts), and the status says what to fix; a good
// list again rolls them onto it; unset, the copy goes.
func TestExportersKeepTheLastGoodMetricsList(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	const good, better = "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization.\n", "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"
	user := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "metrics-config", Namespace: controllertest.Namespace},
		Data: map[string]string{dcgmexporter.MetricsKey: good}}
	g.Expect(suite.Client.Create(f.Ctx, user)).To(Succeed())
	t.Cleanup(func() { _ = suite.Client.Delete(f.Ctx, user) })
	copyOf := func() string {
		cm := &corev1.ConfigMap{}
		err := suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: controllertest.Namespace, Name: dcgmexporter.MetricsCopy}, cm)
		if apierrors.IsNotFound(err) {
			return "<none>"
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data[dcgmexporter.MetricsKey]
	}
	exporter := func() (mounted, digest string) {
		ds := f.DaemonSets("dcgm-exporter")
		g.Expect(ds).To(HaveLen(1))
		for _, v := range ds[0].Spec.Template.Spec.Volumes {
			if v.Name == "metrics-config" {
				mounted = v.ConfigMap.Name
			}
		}
		return mounted, ds[0].Spec.Template.Annotations[dcgmexporter.AnnotationMetricsDigest]
	}
	degraded := func() string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		if c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			return c.Message
		}
		return ""
	}
	on := func(list string) {
		t.Helper()
		g.Eventually(copyOf, controllertest.Timeout, controllertest.Interval).Should(Equal(list))
		g.Eventually(func() []string { m, d := exporter(); return []string{m, d} }, controllertest.Timeout, controllertest.Interval).
			Should(Equal([]string{dcgmexporter.MetricsCopy, dcgmexporter.MetricsDigest(list)}))
	}
	edit := func(list string) {
		g.Eventually(func() error {
			cm := &corev1.ConfigMap{}
			if err := suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(user), cm); err != nil {
				return err
			}
			cm.Data[dcgmexporter.MetricsKey] = list
			return suite.Client.Update(f.Ctx, cm)
		}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	}

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DCGMExporter.Config = &gpuv1.DCGMExporterMetricsConfig{Name: user.Name}
	})
	on(good)

	edit("DCGM_FI_DEV_GPU_UTIL gauge GPU utilization\n")
	g.Eventually(degraded, controllertest.Timeout, controllertest.Interval).Should(And(
		ContainSubstring("dcgmExporter.config.name names ConfigMap metrics-config, whose dcgm-metrics.csv dcgm-exporter would refuse at start"),
		ContainSubstring("the exporters run its last good list, kept in ConfigMap "+dcgmexporter.MetricsCopy)))
	// The pass that wrote the status applied the objects first.
	on(good)

	g.Expect(suite.Client.Delete(f.Ctx, user)).To(Succeed())
	g.Eventually(degraded, controllertest.Timeout, controllertest.Interval).Should(And(
		ContainSubstring("which does not exist"), ContainSubstring("last good list")))
	on(good)

	user.ResourceVersion = ""
	user.Data[dcgmexporter.MetricsKey] = better
	g.Expect(suite.Client.Create(f.Ctx, user)).To(Succeed())
	on(better)
	g.Eventually(degraded, controllertest.Timeout, controllertest.Interval).ShouldNot(ContainSubstring("dcgmExporter.config"))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DCGMExporter.Config = nil })
	g.Eventually(copyOf, controllertest.Timeout, controllertest.Interval).Should(Equal("<none>"), "nothing left behind")
}
