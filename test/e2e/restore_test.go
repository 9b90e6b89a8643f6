//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// userMarks are the node labels and annotations specs set as a person or
// the simulator's fault injection would: each spec's are put back after
// it.
var userMarks = struct{ labels, annotations []string }{
	labels: []string{gpuv1.LabelMIGConfig, gpuv1.LabelDevicePluginConfig, gpuv1.LabelUpgradeSkip, "gpu-pool", "driver.config", "zone",
		"driver.precompiled", "driver.version", state.LabelKernelVersion},
	annotations: []string{fakenode.AnnotationUnhealthyGPUs, fakenode.AnnotationUnhealthyUntil, fakenode.AnnotationMIGApply,
		fakenode.AnnotationMIGAnchor, gpuv1.AnnotationRemediationApproved},
}

// ensureInstalled installs the chart with args (this chart's own values:
// the notes list none of NVIDIA's as ignored) unless it is installed, runs
// the operator, and waits until the nodes are ready.
func ensureInstalled(ctx context.Context, args []string, nodes []string) {
	if _, err := sh("bin/helm", "status", "gpu-operator", "-n", "gpu-operator"); err != nil {
		InstallSpec(InstallInput{HelmArgs: args, Absent: []string{"values of NVIDIA's chart are accepted and ignored"}})
		AllReadySpec(ctx, AllReadyInput{Nodes: nodes})
		return
	}
	if op == nil {
		op = startOperator()
	}
	waitAllReady(ctx, nodes)
}

// ensureUninstalled uninstalls the chart if it is installed.
func ensureUninstalled(ctx context.Context) {
	if _, err := sh("bin/helm", "status", "gpu-operator", "-n", "gpu-operator"); err == nil {
		if op == nil {
			op = startOperator() // its cleanup hook waits for the operator
		}
		UninstallSpec(ctx)
	}
}

// leavesTheClusterAsItFoundIt puts back, after each spec of an installed
// container, what the spec changed: the release's values, the policy (but
// for the driver version, which the upgrade specs move on), and the marks
// specs set on nodes; then it waits until the nodes are ready. A spec
// cleans up after itself; this is what makes the next one independent of
// how it ended, a failure included.
func leavesTheClusterAsItFoundIt(nodes []string) {
	var before *snapshot
	BeforeEach(func(ctx SpecContext) { before = takeSnapshot(ctx) })
	AfterEach(func(ctx SpecContext) {
		if op == nil {
			op = startOperator()
		}
		before.restore(ctx)
		// Drivers at rest, then ready again; the order each chain formed
		// in is the specs' to check, which know which history they kept.
		waitDriversSettled(ctx, nodes)
		waitAllReady(ctx, nodes)
	})
}

// waitDriversSettled waits until no node is in a driver upgrade and each
// node's driver pod is its DaemonSet's current one. A spec that moved
// drivers between pools or NVIDIADrivers leaves, once its settings are put
// back, nodes whose drivers still have to move back through the upgrade:
// ready on every state until their upgrade starts, they would hand the
// next spec a replacement in progress.
func waitDriversSettled(ctx context.Context, nodes []string) {
	if !policy(Default, ctx).Spec.Driver.IsEnabled() {
		return
	}
	Eventually(func(g Gomega) {
		for _, n := range nodes {
			st := gpuv1.UpgradeState(node(g, ctx, n).Labels[gpuv1.LabelUpgradeState])
			g.Expect(st == "" || st == gpuv1.UpgradeDone).To(BeTrue(), "node %s is in the upgrade: %s", n, st)
			p := podOn(ctx, n, "driver")
			g.Expect(p).NotTo(BeNil(), "no driver pod on %s", n)
			owner := metav1.GetControllerOf(p)
			g.Expect(owner).NotTo(BeNil(), "the driver pod on %s is orphaned", n)
			ds := &appsv1.DaemonSet{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: owner.Name}, ds)).To(Succeed())
			g.Expect(p.Annotations[render.AnnotationTemplateHash]).To(Equal(ds.Spec.Template.Annotations[render.AnnotationTemplateHash]),
				"the driver pod on %s is not its DaemonSet %s's current one", n, ds.Name)
		}
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
}

// snapshot is what leavesTheClusterAsItFoundIt puts back.
type snapshot struct {
	values map[string]any
	policy gpuv1.ClusterPolicySpec
	// marks holds each node's user marks, by key; absent keys are absent.
	labels, annotations map[string]map[string]string
}

func takeSnapshot(ctx context.Context) *snapshot {
	s := &snapshot{values: releaseValues(), policy: policy(Default, ctx).Spec,
		labels: map[string]map[string]string{}, annotations: map[string]map[string]string{}}
	list := &corev1.NodeList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	for _, n := range list.Items {
		s.labels[n.Name] = pick(n.Labels, userMarks.labels)
		s.annotations[n.Name] = pick(n.Annotations, userMarks.annotations)
	}
	return s
}

func (s *snapshot) restore(ctx context.Context) {
	if values := releaseValues(); !equality.Semantic.DeepEqual(values, s.values) {
		raw, err := json.Marshal(s.values)
		Expect(err).NotTo(HaveOccurred())
		file := filepath.Join(simDir, "restore-values.json")
		Expect(os.WriteFile(file, raw, 0o644)).To(Succeed())
		_, err = sh("bin/helm", "upgrade", "gpu-operator", "deployments/gpu-operator", "-n", "gpu-operator", "--reset-values", "-f", file)
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func(g Gomega) {
		cp := policy(g, ctx)
		want := *s.policy.DeepCopy()
		want.Driver.Version = cp.Spec.Driver.Version
		if equality.Semantic.DeepEqual(cp.Spec, want) {
			return
		}
		cp.Spec = want
		g.Expect(k8s.Update(ctx, cp)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	for name, labels := range s.labels {
		restoreMarks(ctx, name, func(n *corev1.Node) *map[string]string { return &n.Labels }, userMarks.labels, labels)
	}
	for name, annotations := range s.annotations {
		restoreMarks(ctx, name, func(n *corev1.Node) *map[string]string { return &n.Annotations }, userMarks.annotations, annotations)
	}
}

// restoreMarks sets the keys of one of a node's maps back to want.
func restoreMarks(ctx context.Context, name string, field func(*corev1.Node) *map[string]string, keys []string, want map[string]string) {
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, n)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		m := field(n)
		if maps.Equal(pick(*m, keys), want) {
			return
		}
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if *m == nil {
			*m = map[string]string{}
		}
		for _, k := range keys {
			if v, ok := want[k]; ok {
				(*m)[k] = v
			} else {
				delete(*m, k)
			}
		}
		g.Expect(k8s.Patch(ctx, n, patch)).To(Succeed())
	}).WithTimeout(30*time.Second).Should(Succeed(), "node %s", name)
}

func pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// releaseValues are the values the release was installed or upgraded with.
func releaseValues() map[string]any {
	out, err := output("bin/helm", "get", "values", "gpu-operator", "-n", "gpu-operator", "-o", "json")
	Expect(err).NotTo(HaveOccurred())
	values := map[string]any{}
	Expect(json.Unmarshal([]byte(out), &values)).To(Succeed())
	return values
}
