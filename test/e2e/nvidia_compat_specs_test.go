//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// nvidiaSelectors are the label selectors NVIDIA users find each operand's
// pods by (NVIDIA's gpu-operator v26.7.0 assets/, its CI scripts and
// must-gather), and the state whose pods each must find.
var nvidiaSelectors = []struct {
	selector string
	state    state.Name
}{
	{"app=nvidia-driver-daemonset", state.Driver},
	{"app.kubernetes.io/component=nvidia-driver", state.Driver},
	{"app=nvidia-container-toolkit-daemonset", state.ContainerToolkit},
	{"app=nvidia-device-plugin-daemonset", state.DevicePlugin},
	{"app=nvidia-dcgm-exporter", state.DCGMExporter},
	{"app=gpu-feature-discovery", state.GPUFeatureDiscovery},
}

// NVIDIASelectorsSpec runs the kubectl lines of NVIDIA users' runbooks as
// they wrote them: each finds its operand's pod on every ready node, and
// only that operand's pods.
func NVIDIASelectorsSpec(ctx context.Context, nodes []string) {
	for _, s := range nvidiaSelectors {
		out, err := output("bin/kubectl", "get", "pods", "-n", "gpu-operator", "-l", s.selector,
			"-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
		Expect(err).NotTo(HaveOccurred(), "kubectl get pods -l %s", s.selector)
		found := map[string]bool{}
		for _, name := range strings.Fields(out) {
			p := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "gpu-operator", Name: name}, p)).To(Succeed())
			Expect(p.Labels[render.LabelState]).To(Equal(string(s.state)), "-l %s found pod %s", s.selector, name)
			found[p.Spec.NodeName] = true
		}
		for _, n := range nodes {
			Expect(found).To(HaveKey(n), "kubectl get pods -n gpu-operator -l %s finds no pod on node %s", s.selector, n)
		}
		GinkgoWriter.Printf("kubectl get pods -n gpu-operator -l %s: %d pods\n", s.selector, len(strings.Fields(out)))
	}
}

// NVIDIAFieldsSpec runs what NVIDIA's documentation gives for custom
// dcgm-exporter metrics and a JSON patch of the exporter's Service, as
// written, and checks the operator acts on each: the exporter pods on
// every ready node read the metrics list from the ConfigMap, the Service
// takes the patched policy, and the policy's status lists neither as
// ignored.
func NVIDIAFieldsSpec(ctx context.Context, nodes []string) {
	csv := filepath.Join(GinkgoT().TempDir(), "dcgm-metrics.csv")
	Expect(os.WriteFile(csv, []byte("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\nDCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"),
		0o600)).To(Succeed())
	_, err := sh("bin/kubectl", "create", "configmap", "metrics-config", "-n", "gpu-operator", "--from-file="+csv)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, _ = sh("bin/kubectl", "delete", "configmap", "metrics-config", "-n", "gpu-operator", "--ignore-not-found")
	})
	helmUpgrade("--set", "dcgmExporter.config.name=metrics-config",
		"dcgmExporter.env[0].name=DCGM_EXPORTER_COLLECTORS", "dcgmExporter.env[0].value=/etc/dcgm-exporter/dcgm-metrics.csv")
	_, err = sh("bin/kubectl", "patch", "clusterpolicy/cluster-policy", "--type=json",
		"-p", `[{"op": "add", "path": "/spec/dcgmExporter/service", "value": {"internalTrafficPolicy": "Local"}}]`)
	Expect(err).NotTo(HaveOccurred())

	Eventually(func(g Gomega) {
		for _, n := range nodes {
			p := podOn(ctx, n, string(state.DCGMExporter))
			g.Expect(p).NotTo(BeNil(), "exporter pod on %s", n)
			g.Expect(envOf(p, "DCGM_EXPORTER_COLLECTORS")).To(Equal("/etc/dcgm-exporter/dcgm-metrics.csv"))
			g.Expect(p.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", dcgmexporter.MetricsCopy)), "node %s: the operator's copy", n)
			g.Expect(p.Annotations).To(HaveKey(dcgmexporter.AnnotationMetricsDigest))
		}
		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "gpu-operator", Name: dcgmexporter.ServiceName}, svc)).To(Succeed())
		g.Expect(svc.Spec.InternalTrafficPolicy).To(HaveValue(Equal(corev1.ServiceInternalTrafficPolicyLocal)))
		g.Expect(policy(g, ctx).Status.IgnoredFields).NotTo(ContainElement(HavePrefix("spec.dcgmExporter")))
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
	GinkgoWriter.Printf("every exporter reads metrics-config; Service %s is internalTrafficPolicy Local\n", dcgmexporter.ServiceName)

	// The ConfigMap deleted: the exporters keep the last good list, and
	// one made again (here, deleted) still starts on it.
	copied, err := output("bin/kubectl", "get", "configmap", dcgmexporter.MetricsCopy, "-n", "gpu-operator", "-o", "jsonpath={.data.dcgm-metrics\\.csv}")
	Expect(err).NotTo(HaveOccurred())
	Expect(copied).To(ContainSubstring("DCGM_FI_DEV_FB_USED"))
	_, err = sh("bin/kubectl", "delete", "configmap", "metrics-config", "-n", "gpu-operator")
	Expect(err).NotTo(HaveOccurred())
	gone := podOn(ctx, nodes[0], string(state.DCGMExporter))
	Expect(k8s.Delete(ctx, gone)).To(Succeed())
	Eventually(func(g Gomega) {
		p := podOn(ctx, nodes[0], string(state.DCGMExporter))
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.UID).NotTo(Equal(gone.UID))
		g.Expect(p.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", dcgmexporter.MetricsCopy)))
		g.Expect(fakenode.PodReady(p)).To(BeTrue(), "the exporter made again starts on the last good list")
		degraded := meta.FindStatusCondition(policy(g, ctx).Status.Conditions, gpuv1.ConditionDegraded)
		g.Expect(degraded).NotTo(BeNil())
		g.Expect(degraded.Message).To(ContainSubstring("the exporters run its last good list"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	kept, err := output("bin/kubectl", "get", "configmap", dcgmexporter.MetricsCopy, "-n", "gpu-operator", "-o", "jsonpath={.data.dcgm-metrics\\.csv}")
	Expect(err).NotTo(HaveOccurred())
	Expect(kept).To(Equal(copied))
	GinkgoWriter.Printf("metrics-config deleted: the exporter on %s made again runs the last good list\n", nodes[0])

	// Pod Security Admission from the ClusterPolicy, as NVIDIA's users
	// turn it on after an install without it; the operator, under its
	// own Role, labels its namespace.
	DeferCleanup(func() {
		_, _ = sh("bin/kubectl", "patch", "clusterpolicy/cluster-policy", "--type=json",
			"-p", `[{"op": "replace", "path": "/spec/psa/enabled", "value": false}]`)
		_, _ = sh("bin/kubectl", "label", "namespace", "gpu-operator", "pod-security.kubernetes.io/enforce-",
			"pod-security.kubernetes.io/audit-", "pod-security.kubernetes.io/warn-")
	})
	ns := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "gpu-operator"}, ns)).To(Succeed())
	Expect(ns.Labels).NotTo(HaveKey("pod-security.kubernetes.io/enforce"), "the documented install labels nothing")
	_, err = sh("bin/kubectl", "patch", "clusterpolicy/cluster-policy", "--type=json",
		"-p", `[{"op": "replace", "path": "/spec/psa/enabled", "value": true}]`)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "gpu-operator"}, ns)).To(Succeed())
		for _, mode := range []string{"enforce", "audit", "warn"} {
			g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/"+mode, "privileged"))
		}
		g.Expect(policy(g, ctx).Status.IgnoredFields).NotTo(ContainElement(HavePrefix("spec.psa")))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	GinkgoWriter.Printf("namespace gpu-operator labelled pod-security.kubernetes.io/enforce=privileged by the operator\n")
}

// StandaloneDCGMSpec turns NVIDIA's standalone DCGM host engine on with
// the JSON patch NVIDIA users run, as written: every ready node runs
// nvidia-dcgm, its dcgm state ready, and its dcgm-exporter is a pod made
// after that, reading the node's engine through Service nvidia-dcgm.
func StandaloneDCGMSpec(ctx context.Context, nodes []string) {
	_, err := sh("bin/kubectl", "patch", "clusterpolicy/cluster-policy", "--type=json",
		"-p", `[{"op": "replace", "path": "/spec/dcgm/enabled", "value": true}]`)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		for _, n := range nodes {
			g.Expect(nodeLabel(g, ctx, n, gpuv1.StateLabel(string(state.DCGM)))).To(Equal("ready"), "node %s", n)
			engine := podOn(ctx, n, string(state.DCGM))
			g.Expect(engine).NotTo(BeNil(), "nvidia-dcgm pod on %s", n)
			g.Expect(engine.Labels).To(HaveKeyWithValue("app", "nvidia-dcgm"))
			exporter := podOn(ctx, n, string(state.DCGMExporter))
			g.Expect(exporter).NotTo(BeNil(), "exporter pod on %s", n)
			g.Expect(envOf(exporter, "DCGM_REMOTE_HOSTENGINE_INFO")).To(Equal("nvidia-dcgm:5555"), "node %s", n)
			g.Expect(exporter.CreationTimestamp.Time).To(BeTemporally(">=", engine.CreationTimestamp.Time),
				"the exporter on %s starts after its host engine", n)
			g.Expect(nodeLabel(g, ctx, n, gpuv1.StateLabel(string(state.DCGMExporter)))).To(Equal("ready"), "node %s", n)
		}
		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "gpu-operator", Name: "nvidia-dcgm"}, svc)).To(Succeed())
		g.Expect(svc.Spec.InternalTrafficPolicy).To(HaveValue(Equal(corev1.ServiceInternalTrafficPolicyLocal)))
		g.Expect(policy(g, ctx).Status.IgnoredFields).NotTo(ContainElement(HavePrefix("spec.dcgm:")))
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
	GinkgoWriter.Printf("nvidia-dcgm ready on %d nodes; each exporter reads nvidia-dcgm:5555\n", len(nodes))
}
