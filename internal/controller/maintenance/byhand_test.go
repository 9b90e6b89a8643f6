package maintenance

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A replacement by hand is a pod the node's wanted DaemonSet made at its
// current spec, of another UID than the outdated one recorded on an
// upgrade-required node: nothing else, so that no node is cordoned and
// evicted for a pod nobody replaced.
func TestOutdatedPodFate(t *testing.T) {
	pools := driverpool.FromPolicy(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "570.172.08"}}})
	labels := map[string]string{"feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04"}
	want, _ := pools.DaemonSetFor("n", labels)
	pod := func(uid, ds, hash string) *operandpods.Pod {
		p := &operandpods.Pod{DaemonSet: ds, Workload: ds, Annotations: []state.Annotation{{Key: render.AnnotationTemplateHash, Value: hash}}}
		p.UID = types.UID(uid)
		return p
	}
	for name, tt := range map[string]struct {
		state    gpuv1.UpgradeState
		recorded string
		pod      *operandpods.Pod
		deleting bool
		replaced bool
		gone     bool
	}{
		"replaced by a current pod":         {state: gpuv1.UpgradeRequired, recorded: "old", pod: pod("new", want, "h"), replaced: true},
		"the outdated pod still there":      {state: gpuv1.UpgradeRequired, recorded: "old", pod: pod("old", want, "h")},
		"replaced by an outdated pod":       {state: gpuv1.UpgradeRequired, recorded: "old", pod: pod("new", want, "older")},
		"replaced by another DaemonSet's":   {state: gpuv1.UpgradeRequired, recorded: "old", pod: pod("new", "other", "h")},
		"replaced while its DaemonSet goes": {state: gpuv1.UpgradeRequired, recorded: "old", pod: pod("new", want, "h"), deleting: true},
		"gone, none in its place":           {state: gpuv1.UpgradeRequired, recorded: "old", gone: true},
		"nothing recorded":                  {state: gpuv1.UpgradeRequired, pod: pod("new", want, "h")},
		"in another state":                  {state: gpuv1.UpgradeDone, recorded: "old", pod: pod("new", want, "h")},
		"in the upgrade's own pod restart":  {state: gpuv1.UpgradePodRestart, recorded: "old", pod: pod("new", want, "h")},
	} {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{gpuv1.LabelUpgradeState: string(tt.state)},
				Annotations: map[string]string{}}}
			for k, v := range labels {
				n.Labels[k] = v
			}
			if tt.recorded != "" {
				n.Annotations[AnnotationOutdatedPod] = tt.recorded
			}
			obs := &observed{hashes: map[string]string{want: "h", "other": "h"}, deleting: map[string]bool{want: tt.deleting}, pools: pools,
				driverPods: map[string]*operandpods.Pod{}}
			if tt.pod != nil {
				obs.driverPods["n"] = tt.pod
			}
			replaced, gone := (&pass{obs: obs}).outdatedPodFate(n)
			g := NewWithT(t)
			g.Expect(replaced).To(Equal(tt.replaced), "replaced")
			g.Expect(gone).To(Equal(tt.gone), "gone")
		})
	}
}

// A by-hand upgrade's marks: the outdated pod is recorded on entering
// upgrade-required and kept there; a start by hand keeps it, and the
// by-hand mark, to the end, failed included, so that a person's retry runs
// the steps again; a plain start drops both.
func TestByHandMarksLastAsLongAsTheirUpgrade(t *testing.T) {
	g := NewWithT(t)
	node := func(st gpuv1.UpgradeState, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{gpuv1.LabelUpgradeState: string(st)},
			Annotations: annotations}}
	}
	p := &operandpods.Pod{}
	p.UID = "old"
	marks := func(n *corev1.Node, step upgradeStep) map[string]string {
		return upgradeMarks(n, step.next, step.byHand, step.from, p)
	}
	g.Expect(marks(node("", nil), upgradeStep{from: "", next: gpuv1.UpgradeRequired})).
		To(HaveKeyWithValue(AnnotationOutdatedPod, "old"))
	recorded := map[string]string{AnnotationOutdatedPod: "old"}
	g.Expect(marks(node(gpuv1.UpgradeRequired, recorded), upgradeStep{from: gpuv1.UpgradeRequired, next: gpuv1.UpgradeRequired})).
		To(HaveKeyWithValue(AnnotationOutdatedPod, "old"))
	start := marks(node(gpuv1.UpgradeRequired, recorded), upgradeStep{from: gpuv1.UpgradeRequired, next: gpuv1.UpgradeCordonRequired, byHand: true})
	g.Expect(start).To(And(HaveKeyWithValue(AnnotationOutdatedPod, "old"), HaveKeyWithValue(AnnotationByHand, "true")))
	failed := marks(node(gpuv1.UpgradePodDeletion, start), upgradeStep{from: gpuv1.UpgradePodDeletion, next: gpuv1.UpgradeFailed})
	g.Expect(failed).To(And(HaveKeyWithValue(AnnotationOutdatedPod, "old"), HaveKeyWithValue(AnnotationByHand, "true")))
	done := marks(node(gpuv1.UpgradeUncordon, start), upgradeStep{from: gpuv1.UpgradeUncordon, next: gpuv1.UpgradeDone})
	g.Expect(done).NotTo(Or(HaveKey(AnnotationOutdatedPod), HaveKey(AnnotationByHand)))
	// A person relabels the failed node upgrade-required: a plain start
	// from there is a plain upgrade.
	plain := marks(node(gpuv1.UpgradeRequired, start), upgradeStep{from: gpuv1.UpgradeRequired, next: gpuv1.UpgradeCordonRequired})
	g.Expect(plain).NotTo(Or(HaveKey(AnnotationOutdatedPod), HaveKey(AnnotationByHand)))
}

type upgradeStep struct {
	from, next gpuv1.UpgradeState
	byHand     bool
}
