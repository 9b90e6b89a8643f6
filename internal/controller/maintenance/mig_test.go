package maintenance

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Finding 6 of issue 25: an attempt's word is its own pod's, known by the
// pod's UID, not by comparing the pod's creation time with the operator's
// clock (which may run ahead of the API server's, so that every success
// was ignored); a pod that replaced the attempt's, or one of an attempt
// before still terminating, does not speak for it.
func TestMIGAttemptIsItsPods(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	attempt := func(annotations map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
			gpuv1.LabelMIGReconfigureState: string(gpuv1.MIGApply), gpuv1.LabelMIGConfig: "all-1g.18gb",
			gpuv1.LabelMIGConfigState: gpuv1.MIGConfigSuccess,
		}, Annotations: map[string]string{
			AnnotationMIGTarget: "all-1g.18gb", AnnotationMIGAttempt: "1",
			// The operator's clock ran ahead: the attempt started "after"
			// its pod was created.
			AnnotationMIGAttemptSince: now.Add(2 * time.Second).Format(time.RFC3339),
		}}}
		for k, v := range annotations {
			n.Annotations[k] = v
		}
		return n
	}
	pod := func(uid string, terminating bool) *operandpods.Pod {
		p := &operandpods.Pod{}
		p.UID, p.CreationTimestamp = types.UID(uid), metav1.NewTime(now)
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	tests := map[string]struct {
		node       *corev1.Node
		pods       []*operandpods.Pod
		word       string
		bind       string
		podGone    bool
		managerPod int
	}{
		"the first pod, alone: the attempt's":      {node: attempt(nil), pods: []*operandpods.Pod{pod("p1", false)}, word: "success", bind: "p1", managerPod: 1},
		"the attempt's pod, its clock behind ours": {node: attempt(map[string]string{AnnotationMIGAttemptPod: "p1"}), pods: []*operandpods.Pod{pod("p1", false)}, word: "success", managerPod: 1},
		"a pod that replaced the attempt's":        {node: attempt(map[string]string{AnnotationMIGAttemptPod: "p1"}), pods: []*operandpods.Pod{pod("p2", false)}, podGone: true, managerPod: 1},
		"the attempt's pod gone":                   {node: attempt(map[string]string{AnnotationMIGAttemptPod: "p1"}), podGone: true},
		"a pod of an attempt before still going":   {node: attempt(nil), pods: []*operandpods.Pod{pod("p0", true), pod("p1", false)}, managerPod: 2},
		"no pod yet":                               {node: attempt(nil)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obs := &observed{migClients: map[string]int{}, migManagers: map[string]*operandpods.Pod{}, migManagerPods: map[string]int{}}
			for _, p := range tt.pods {
				obs.migManagerPods["n"]++
				if p.DeletionTimestamp == nil {
					obs.migManagers["n"] = p
				}
			}
			file, err := migconfig.Parse(migmanager.DefaultConfig)
			g.Expect(err).NotTo(HaveOccurred())
			p := &pass{r: &Reconciler{Timers: fixture.Timers()}, cp: &gpuv1.ClusterPolicy{}, obs: obs, now: now, sel: &podSelectors{},
				configs: migConfigs{file: file}}
			f, bind, err := p.r.migFacts(context.Background(), p, tt.node)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.ConfigState).To(Equal(tt.word))
			g.Expect(bind).To(Equal(tt.bind))
			g.Expect(f.AttemptPodGone).To(Equal(tt.podGone))
			g.Expect(f.ManagerPods).To(Equal(tt.managerPod))
		})
	}
}

// A node whose MIG devices are gone (a reboot, a new driver, DynamicMIG)
// serves nothing until a configuration is applied: the node controller
// keeps its device plugin off while a configuration is set and the
// devices are gone (gating.MIGGate), whichever it is. An upgrade's or a
// repair's validation waits for that plugin, so the reconfiguration it
// waits for is the next one, the configuration applied before or a new
// one. Before, only the former was a restore the table lets in within a
// validation: a new one waited for the validation, which waited for it,
// until the upgrade failed. Found by the exhaustive check (2:0:1, the
// DRA driver's DynamicMIG turned on and off).
func TestAnyConfigurationMakesLostMIGDevicesAgain(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.MIGManager.Enabled = ptr.To(true)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	file, err := migconfig.Parse(migmanager.DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	p := &pass{r: &Reconciler{Graph: graph, Timers: fixture.Timers(), APIReader: fakeAPI().Build()}, cp: cp, now: time.Now(),
		obs: &observed{pools: driverpool.FromPolicy(cp)}, configs: migConfigs{file: file}, sel: &podSelectors{},
		machines: []machine{&reconfigurations{}}}
	node := func(desired, under string) *corev1.Node {
		labels := map[string]string{
			gpuv1.LabelMIGReconfigureState:              string(gpuv1.MIGReconfigureRequired),
			gpuv1.LabelMIGConfig:                        desired,
			gpuv1.DeployLabel(string(state.MIGManager)): gpuv1.LabelTrue,
		}
		for _, s := range graph.Prerequisites(state.MIGManager) {
			labels[gpuv1.StateLabel(string(s))] = string(gpuv1.StateReady)
		}
		return gpuNode("a", labels, map[string]string{AnnotationMIGSince: p.now.UTC().Format(time.RFC3339),
			gpuv1.AnnotationMIGApplied: "all-1g.18gb", gpuv1.AnnotationMIGAppliedUnder: under, gpuv1.AnnotationServed: gpuv1.LabelTrue})
	}
	gone, kept := "boot-0/", "boot-1/" // gpuNode boots boot-1
	for _, tc := range []struct {
		desired, under string
		restore        bool
	}{
		{"all-1g.18gb", gone, true},
		{"all-disabled", gone, true},
		{"all-disabled", kept, false},
	} {
		v := p.view(context.Background(), node(tc.desired, tc.under))
		g.Expect(v.MIGRestore).To(Equal(tc.restore), "%s applied under %s", tc.desired, tc.under)
		v.Ops[arbiter.DriverUpgrade] = arbiter.Position{Phase: arbiter.Validating, Since: p.now}
		starts, _ := arbiter.Candidates(&v)
		g.Expect(len(starts) > 0 && starts[0].Op == arbiter.MIGReconfiguration).To(Equal(tc.restore),
			"%s applied under %s: starts within the upgrade's validation", tc.desired, tc.under)
	}
}
