package remediation

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// repairTimeout bounds a repair here: the device plugin's word counts only
// once it has been ready for the settle time (timers.HealthSettle), before
// the repair and after the restart.
const repairTimeout = 3 * time.Minute

// busyLog records, from a watch on nodes, the most nodes ever out of
// service at once for a repair or a driver upgrade, and every version of
// a node that was in both.
type busyLog struct {
	mu    sync.Mutex
	busy  map[string]bool
	last  map[string]string
	peak  int
	both  []string
	lines []string
	start time.Time
}

func recordBusy(f *controllertest.Fixture) *busyLog {
	l := &busyLog{busy: map[string]bool{}, last: map[string]string{}, start: time.Now()}
	f.WatchOwnNodes(l.observe)
	return l
}

func (l *busyLog) observe(n *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rem := gpuv1.RemediationState(n.Labels[gpuv1.LabelRemediationState])
	up := gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState])
	if remediation.InProgress(rem) && upgrade.InProgress(up) {
		l.both = append(l.both, fmt.Sprintf("%s: %s and %s", n.Name, rem, up))
	}
	busy := remediation.InProgress(rem) || upgrade.InProgress(up)
	line := fmt.Sprintf("%s repair=%s upgrade=%s", n.Name, rem, up)
	if l.last[n.Name] == line {
		return
	}
	l.last[n.Name] = line
	l.busy[n.Name] = busy
	count := 0
	for _, b := range l.busy {
		if b {
			count++
		}
	}
	l.peak = max(l.peak, count)
	l.lines = append(l.lines, fmt.Sprintf("%6.1fs %s", time.Since(l.start).Seconds(), line))
}

// Issue 52, finding 2: a repair takes no place of the driver upgrades'
// (maxParallelUpgrades 1), so a rollout goes on beside a repair, never on
// the repaired node itself; maxUnavailable counts both, and a pool that
// may lose one node at a time upgrades only after the repair. The repair
// is held in its eviction by a PodDisruptionBudget until the upgrade's
// decision is seen, then let go.
func TestRepairsAndUpgradesShareOnlyAvailability(t *testing.T) {
	for name, tc := range map[string]struct {
		maxUnavailable intstr.IntOrString
		peak           int
	}{
		"maxUnavailable 100%: side by side":     {maxUnavailable: intstr.FromString("100%"), peak: 2},
		"maxUnavailable 1: one after the other": {maxUnavailable: intstr.FromInt32(1), peak: 1},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
				cp.Spec.Operator.Remediation = gpuv1.RemediationSpec{Enabled: true, MaxParallel: ptr.To(intstr.FromInt32(1))}
				cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(tc.maxUnavailable)
			})
			f.ExpectAllReady(f.Nodes...)
			sick, other := f.Nodes[0], f.Nodes[1]
			pdb := f.HeldGPUPod("pinned", sick)
			log := recordBusy(f)
			f.Annotate(sick, fakenode.AnnotationUnhealthyUntil, fakenode.HealOnDevicePluginRestart)
			f.Annotate(sick, fakenode.AnnotationUnhealthyGPUs, "2")
			f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationEviction), repairTimeout)

			upgrades := f.RecordUpgrades()
			f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
			if tc.peak == 2 {
				f.ExpectUpgradedWithin(upgrades, other, repairTimeout)
			} else {
				g.Eventually(func() map[string]string { return f.Node(other).Annotations }, repairTimeout, controllertest.Interval).
					Should(HaveKeyWithValue(gpuv1.AnnotationMaintenanceWaiting, ContainSubstring("driver.upgradePolicy.maxUnavailable")),
						"the upgrade waits for the availability the repair took")
			}
			g.Expect(f.Node(sick).Labels).To(HaveKeyWithValue(gpuv1.LabelRemediationState, string(gpuv1.RemediationEviction)),
				"the repair is still held")
			g.Expect(suite.Client.Delete(f.Ctx, pdb)).To(Succeed())
			for _, n := range f.Nodes {
				f.ExpectUpgradedWithin(upgrades, n, repairTimeout)
			}
			f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationDone), repairTimeout)
			log.mu.Lock()
			defer log.mu.Unlock()
			t.Logf("repair and upgrades, as the nodes' labels went:\n%s", strings.Join(log.lines, "\n"))
			g.Expect(log.both).To(BeEmpty(), "no node is in a repair and an upgrade at once")
			g.Expect(log.peak).To(Equal(tc.peak), "nodes out of service at once")
		})
	}
}

// remediationMarks lists what of a repair a node carries: its label, the
// operator's unhealthy taint, and the repair's annotations.
func remediationMarks(f *controllertest.Fixture, node string) func() []string {
	return func() []string {
		n := f.Node(node)
		var out []string
		if st, ok := n.Labels[gpuv1.LabelRemediationState]; ok {
			out = append(out, "label="+st)
		}
		if slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint) {
			out = append(out, "taint")
		}
		for k := range n.Annotations {
			if strings.HasPrefix(k, gpuv1.RemediationAnnotationPrefix) && k != gpuv1.AnnotationRemediationApproved {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
}

// A repair held in its eviction (a GPU pod under a PodDisruptionBudget)
// leaves nothing behind when remediation is turned off; a person's
// approval given meanwhile stays; turned on again, the repair starts over
// and spends it; and the ClusterPolicy's deletion removes it all before
// the policy goes (that the finalizer counts the repair's marks is
// TestNotCleanedUp's; that turning remediation off leaves an approval the
// cleanup finds is TestForgettingARepairKeepsTheApproval's: an approval
// given during a repair here would race its spending).
func TestRepairMarksGoWithTheOption(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Operator.Remediation = gpuv1.RemediationSpec{Enabled: true}
	})
	f.ExpectAllReady(f.Nodes...)
	sick := f.Nodes[0]
	f.HeldGPUPod("held", sick)
	f.Annotate(sick, fakenode.AnnotationUnhealthyGPUs, "1")
	f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationEviction), repairTimeout)
	g.Expect(remediationMarks(f, sick)()).To(ContainElements("taint", "label=eviction-required",
		"nvidia.com/gpu-remediation.expected-gpus", "nvidia.com/gpu-remediation.since"))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.Remediation.Enabled = false })
	g.Eventually(remediationMarks(f, sick), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	f.Annotate(sick, gpuv1.AnnotationRemediationApproved, gpuv1.LabelTrue)

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.Remediation.Enabled = true })
	f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationEviction), controllertest.Timeout)
	g.Eventually(remediationMarks(f, sick), controllertest.Timeout, controllertest.Interval).Should(ContainElement("taint"))
	g.Eventually(func() map[string]string { return f.Node(sick).Annotations }, controllertest.Timeout, controllertest.Interval).
		ShouldNot(HaveKey(gpuv1.AnnotationRemediationApproved), "spent once the repair started")

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	// The policy first, then the node: a policy gone while the node still
	// carries a mark would be a finalizer that did not wait.
	var leftWhenGone []string
	g.Eventually(func() bool {
		if len(f.Policies()) > 0 {
			return false
		}
		leftWhenGone = remediationMarks(f, sick)()
		return true
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	g.Expect(leftWhenGone).To(BeEmpty(), "the policy goes only once the taint and annotations are gone")
}
