//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// NVIDIADriverInput names the nodes NVIDIADriverSpec moves: two to
// NVIDIA's demo-gold, one to its demo-silver; the others stay on the
// default NVIDIADriver.
type NVIDIADriverInput struct {
	Gold, Silver, Others []string
}

// NVIDIADriverSpec hands a running cluster's drivers to NVIDIADriver
// resources the way a person does with NVIDIA's chart and examples:
// helm upgrade --set driver.nvidiaDriverCRD.enabled=true, then NVIDIA's
// two-pool example applied unchanged. The nodes on the default
// NVIDIADriver keep their drivers (same pod, no upgrade); the labelled
// ones move to their NVIDIADriver's version through the upgrade, one per
// pool at a time. A third NVIDIADriver selecting a gold node conflicts
// there: the node keeps its driver and both resources say so, until the
// third one goes.
func NVIDIADriverSpec(ctx context.Context, in NVIDIADriverInput) {
	all := slices.Concat(in.Gold, in.Silver, in.Others)
	AllReadySpec(ctx, AllReadyInput{Nodes: all})
	before := driverPods(ctx, all)
	tl := watchTimeline(ctx, all)
	defer tl.stop()
	defer func() { AddReportEntry("NVIDIADriver timeline", tl.String()) }()

	// The chart's default NVIDIADriver describes the default pool as it
	// is: turning it on replaces nothing.
	tl.mark("helm upgrade --set driver.nvidiaDriverCRD.enabled=true")
	helmSet("driver.nvidiaDriverCRD.enabled=true")
	DeferCleanup(func(ctx SpecContext) { deleteNVIDIADrivers(ctx, "demo-gold", "demo-silver", "zonal") })
	// The default NVIDIADriver also holds the nodes that never get ready
	// (the broken one): it reports, whatever its state.
	Eventually(func(g Gomega) {
		d := getNVIDIADriver(g, ctx, "default")
		g.Expect(d.Status.State).To(BeElementOf(gpuv1alpha1.StateReady, gpuv1alpha1.StateNotReady))
		g.Expect(d.Status.Nodes).To(BeNumerically(">=", len(all)))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	Consistently(func() map[string]string { return driverPods(ctx, all) }).WithTimeout(10*time.Second).
		Should(Equal(before), "no driver replaced by turning NVIDIADrivers on")
	// NVIDIA's owner label, as NVIDIA users select an NVIDIADriver's nodes,
	// and NVIDIA's upgrade-done on every node whose driver is current.
	expectOwners(ctx, "default", all)
	Eventually(func(g Gomega) {
		for _, n := range all {
			g.Expect(nodeLabel(g, ctx, n, gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeDone)), "node %s", n)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	for _, n := range in.Gold {
		setNodeLabel(ctx, n, "driver.config", "gold")
	}
	for _, n := range in.Silver {
		setNodeLabel(ctx, n, "driver.config", "silver")
	}
	tl.mark("labelled gold and silver nodes; NVIDIA's nvd-driver-multiple.yaml applied")
	applyNVIDIAExample(ctx, "nvd-driver-multiple.yaml")
	expectDriverVersion(ctx, in.Gold, "demo-gold", "580.126.20")
	expectDriverVersion(ctx, in.Silver, "demo-silver", "470.141.10")
	expectNVIDIADriver(ctx, "demo-gold", gpuv1alpha1.StateReady, fmt.Sprintf("%d/%d", len(in.Gold), len(in.Gold)))
	expectNVIDIADriver(ctx, "demo-silver", gpuv1alpha1.StateReady, fmt.Sprintf("%d/%d", len(in.Silver), len(in.Silver)))
	waitAllReady(ctx, all)
	expectOwners(ctx, "demo-gold", in.Gold)
	expectOwners(ctx, "demo-silver", in.Silver)
	expectOwners(ctx, "default", in.Others)
	Expect(tl.peak(in.Gold)).To(Equal(1), "one gold node at a time:\n%s", tl)
	after := driverPods(ctx, all)
	for _, n := range in.Others {
		Expect(after[n]).To(Equal(before[n]), "node %s on the default NVIDIADriver keeps its driver", n)
		Expect(tl.upgraded(n)).To(BeFalse(), "node %s entered the upgrade", n)
	}

	// A conflict: the node keeps its driver, both resources say so.
	conflicted := in.Gold[0]
	setNodeLabel(ctx, conflicted, "zone", "a")
	zonal := &gpuv1alpha1.NVIDIADriver{}
	zonal.Name = "zonal"
	zonal.Spec.NodeSelector = gpuv1.Labels{"zone": "a"}
	zonal.Spec.Version = "575.57.08"
	tl.mark("NVIDIADriver zonal (zone=a) created: " + conflicted + " selected by demo-gold and zonal")
	Expect(k8s.Create(ctx, zonal)).To(Succeed())
	Eventually(func(g Gomega) {
		for name, other := range map[string]string{"demo-gold": "zonal", "zonal": "demo-gold"} {
			d := getNVIDIADriver(g, ctx, name)
			g.Expect(d.Status.Conflicts).To(ContainElement(gpuv1alpha1.NodeConflict{Node: conflicted, With: []string{other}}), name)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	held := driverPods(ctx, []string{conflicted})
	Consistently(func(g Gomega) {
		g.Expect(driverPods(ctx, []string{conflicted})).To(Equal(held))
		g.Expect(nodeLabel(g, ctx, conflicted, gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeDone)), "the last upgrade's end, no new one")
		g.Expect(nodeLabel(g, ctx, conflicted, gpuv1.LabelDriverPool)).To(Equal("demo-gold"))
		g.Expect(nodeLabel(g, ctx, conflicted, gpuv1.LabelDriverOwner)).To(Equal("demo-gold"), "the owner is kept in a conflict, as NVIDIA's is")
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
	// NVIDIA's words in the condition, which its users' scripts look for.
	Expect(getNVIDIADriver(Default, ctx, "zonal").Status.Conditions).To(ContainElement(And(
		HaveField("Type", gpuv1alpha1.ConditionError), HaveField("Message", HavePrefix("multiple NVIDIADrivers match the same node "+conflicted)))))
	Expect(getNVIDIADriver(Default, ctx, "zonal").Status.State).To(Equal(gpuv1alpha1.StateNotReady))
	tl.mark("conflict reported by both; zonal deleted")
	Expect(k8s.Delete(ctx, zonal)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(getNVIDIADriver(g, ctx, "demo-gold").Status.Conflicts).To(BeEmpty())
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	Expect(driverPods(ctx, []string{conflicted})).To(Equal(held), "settled in the node's own pool: nothing to replace")
	tl.mark("conflict gone from demo-gold's status; " + conflicted + " runs the same driver pod")
	GinkgoWriter.Printf("NVIDIADriver timeline:\n%s\n", tl)
}

// expectOwners runs NVIDIA's selection of an NVIDIADriver's nodes,
// kubectl get nodes -l nvidia.com/gpu.present=true,
// nvidia.com/gpu-operator.driver.owner=<name>, and waits until it finds
// every one of nodes.
func expectOwners(ctx context.Context, owner string, nodes []string) {
	Eventually(func(g Gomega) {
		out, err := output("bin/kubectl", "get", "nodes", "-l", "nvidia.com/gpu.present=true,"+gpuv1.LabelDriverOwner+"="+owner,
			"-o", "jsonpath={.items[*].metadata.name}")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Fields(out)).To(ContainElements(nodes), "owner %s", owner)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// applyNVIDIAExample creates the NVIDIADrivers of one of NVIDIA's example
// files, as they are.
func applyNVIDIAExample(ctx context.Context, file string) {
	data, err := os.ReadFile(filepath.Join(root, "test", "crd", "testdata", "nvidiadrivers", file))
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		Expect(k8s.Create(ctx, obj)).To(Succeed())
	}
}

func deleteNVIDIADrivers(ctx context.Context, names ...string) {
	for _, name := range names {
		d := &gpuv1alpha1.NVIDIADriver{}
		d.Name = name
		if err := k8s.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

func getNVIDIADriver(g Gomega, ctx context.Context, name string) *gpuv1alpha1.NVIDIADriver {
	d := &gpuv1alpha1.NVIDIADriver{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, d)).To(Succeed())
	return d
}

// expectNVIDIADriver waits until an NVIDIADriver's state is want and its
// ready count starts with ready.
func expectNVIDIADriver(ctx context.Context, name string, want gpuv1alpha1.State, ready string) {
	Eventually(func(g Gomega) {
		d := getNVIDIADriver(g, ctx, name)
		g.Expect(d.Status.State).To(Equal(want))
		g.Expect(d.Status.ReadyNodes).To(HavePrefix(ready))
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed(), "NVIDIADriver %s", name)
}

// expectDriverVersion waits until the nodes are in the pool and run its
// driver version, uncordoned.
func expectDriverVersion(ctx context.Context, nodes []string, pool, version string) {
	for _, n := range nodes {
		Eventually(func(g Gomega) {
			got := node(g, ctx, n)
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, pool))
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverVersion, version))
			g.Expect(got.Spec.Unschedulable).To(BeFalse())
		}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s, NVIDIADriver %s", n, pool)
	}
}

// driverPods maps each node to its driver pod's UID.
func driverPods(ctx context.Context, nodes []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		if p := podOn(ctx, n, string(state.Driver)); p != nil {
			out[n] = string(p.UID)
		}
	}
	return out
}

// timeline records, per node, each change of its pool, upgrade state and
// driver state, with the time since it started: the per-node history a
// person reads to see what moved when.
type timeline struct {
	mu      sync.Mutex
	start   time.Time
	current map[string]string
	lines   []string
	moved   map[string]bool
	cancel  context.CancelFunc
}

func watchTimeline(ctx context.Context, nodes []string) *timeline {
	ctx, cancel := context.WithCancel(ctx)
	tl := &timeline{start: time.Now(), current: map[string]string{}, moved: map[string]bool{}, cancel: cancel}
	watchNodes(ctx, nodes, tl.observe)
	return tl
}

func (tl *timeline) observe(n *corev1.Node) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	up := n.Labels[gpuv1.LabelUpgradeState]
	key := fmt.Sprintf("pool=%s upgrade=%s driver=%s cordoned=%t", n.Labels[gpuv1.LabelDriverPool], cmp.Or(up, "-"),
		n.Labels[gpuv1.StateLabel(string(state.Driver))], n.Spec.Unschedulable)
	if k := n.Labels[gpuv1.LabelDriverKernel]; k != "" {
		key += " kernel=" + k
	}
	if tl.current[n.Name] == key {
		return
	}
	tl.current[n.Name] = key
	tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs %s %s", time.Since(tl.start).Seconds(), n.Name, key))
	// A label left by an earlier spec's upgrade (upgrade-done) is no move.
	if s := gpuv1.UpgradeState(up); upgrade.InProgress(s) || s == gpuv1.UpgradeRequired {
		tl.moved[n.Name] = true
	}
}

// peak is the most of the nodes upgrading at once (cordoned on their way,
// not queued).
func (tl *timeline) peak(nodes []string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	most, now := 0, map[string]bool{}
	for _, line := range tl.lines {
		f := strings.Fields(line)
		if f[1] == "--" || !slices.Contains(nodes, f[1]) {
			continue
		}
		now[f[1]] = upgrade.InProgress(gpuv1.UpgradeState(strings.TrimPrefix(f[3], "upgrade=")))
		count := 0
		for _, b := range now {
			if b {
				count++
			}
		}
		most = max(most, count)
	}
	return most
}

// mark records what the spec did, between the nodes' changes.
func (tl *timeline) mark(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs -- %s", time.Since(tl.start).Seconds(), what))
}

func (tl *timeline) upgraded(node string) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.moved[node]
}

// upgradedSince reports whether the node entered the upgrade after the
// first mark that starts with what.
func (tl *timeline) upgradedSince(what, node string) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	after := false
	for _, line := range tl.lines {
		f := strings.Fields(line)
		switch {
		case f[1] == "--":
			after = after || strings.HasPrefix(strings.Join(f[2:], " "), what)
		case after && f[1] == node:
			s := gpuv1.UpgradeState(strings.TrimPrefix(f[3], "upgrade="))
			if upgrade.InProgress(s) || s == gpuv1.UpgradeRequired {
				return true
			}
		}
	}
	return false
}

func (tl *timeline) stop() { tl.cancel() }

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}
