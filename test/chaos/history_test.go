package chaos

import (
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// namespace is the operator's: the operand pods recorded are there, and
// pods anywhere else are workloads.
const namespace = simcluster.Namespace

// The chaos recorder keeps every version of the nodes, operand pods and
// ClusterPolicies the API server stored while faults ran, each with its
// resourceVersion. One etcd numbers every write of every kind in one
// sequence, so "the node as it was when this pod was created" is the
// node's last version numbered below the pod's: the invariants are
// checked on that order, after the run, not on when the watches happened
// to deliver.

// nodeVersion is a node as stored at revision rv.
type nodeVersion struct {
	rv uint64
	// seen is when the recording received it.
	seen          time.Time
	labels        map[string]string
	unschedulable bool
	// unhealthyTaint, migTaint and switchTaint: the operator's repair, MIG
	// and allocation mode switch taints.
	unhealthyTaint, migTaint, switchTaint bool
	// domain is the node's NVLink domain: GFD's label, or the one the
	// operation holding it kept.
	domain string
	gone   bool // deleted, or being deleted
}

// podEvent is an operand pod created, or starting to go, at revision rv.
type podEvent struct {
	rv      uint64
	seen    time.Time
	uid     string
	name    string
	state   string
	node    string
	created bool // else: deletion started (or the pod went at once)
	// removed: the pod object left the API server, which is when the
	// kubelet had stopped its containers.
	removed bool
}

// policyVersion says whether an active ClusterPolicy existed at rv.
type policyVersion struct {
	rv      uint64
	present bool
}

// listed marks the objects of the initial list: what existed before the
// recording started, not created under it.
const listed watch.EventType = "LISTED"

// recorder is one run's history, filled by the watches (watch_test.go)
// and read by the checker once the run is over.
type recorder struct {
	mu       sync.Mutex
	nodes    map[string][]nodeVersion
	pods     []podEvent
	podsSeen map[string]bool // uid -> created recorded
	podsGone map[string]bool // uid -> deletion recorded
	// podsRemoved: uid -> removal recorded.
	podsRemoved map[string]bool
	// podsLive are the pods whose creation was recorded and removal not
	// yet, by uid: a list after a gap finds which of them went unseen.
	podsLive map[string]podEvent
	policies []policyVersion
	// gaps counts watch restarts that could have missed versions.
	gaps int
}

// newRecorder returns an empty history.
func newRecorder() *recorder {
	return &recorder{nodes: map[string][]nodeVersion{}, podsSeen: map[string]bool{}, podsGone: map[string]bool{},
		podsRemoved: map[string]bool{}, podsLive: map[string]podEvent{}}
}

// rvOf is an object's resourceVersion as the number etcd's revision is:
// the order of every write, of every kind.
func rvOf(o metav1.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

// observe records one event: every version of a node and of a
// ClusterPolicy, and for an operand pod its creation, the start of its
// going and its removal, each once.
func (r *recorder) observe(t watch.EventType, obj runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.Node:
		v := versionOf(o)
		v.gone = v.gone || t == watch.Deleted
		r.nodes[o.Name] = append(r.nodes[o.Name], v)
	case *corev1.Pod:
		uid := string(o.UID)
		e := podEvent{rv: rvOf(o), seen: time.Now(), uid: uid, name: o.Name, state: o.Labels[render.LabelState], node: targetNode(o)}
		if !r.podsSeen[uid] && t != watch.Deleted && o.DeletionTimestamp == nil {
			r.podsSeen[uid] = true
			e.created = true
			// A pod that existed before the recording started was not
			// created under it.
			if t == watch.Added {
				r.pods = append(r.pods, e)
				r.podsLive[uid] = e
			}
			return
		}
		if !r.podsGone[uid] && (t == watch.Deleted || o.DeletionTimestamp != nil) {
			r.podsGone[uid] = true
			r.pods = append(r.pods, e)
		}
		if t == watch.Deleted && !r.podsRemoved[uid] {
			r.podsRemoved[uid] = true
			delete(r.podsLive, uid)
			e.removed = true
			r.pods = append(r.pods, e)
		}
	case *gpuv1.ClusterPolicy:
		present := t != watch.Deleted && o.DeletionTimestamp == nil
		r.policies = append(r.policies, policyVersion{rv: rvOf(o), present: present})
	}
}

// relisted records, after a list that followed a gap, the removal of every
// pod whose creation was recorded and which the list (at revision rv) no
// longer holds: it went while nothing watched.
func (r *recorder) relisted(pods *corev1.PodList, rv uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	there := map[string]bool{}
	for i := range pods.Items {
		there[string(pods.Items[i].UID)] = true
	}
	for uid, e := range r.podsLive {
		if there[uid] {
			continue
		}
		e.rv, e.seen, e.created, e.removed = rv, time.Now(), false, true
		r.pods = append(r.pods, e)
		r.podsRemoved[uid] = true
		delete(r.podsLive, uid)
	}
}

// versionOf is what the checks read of a node as stored.
func versionOf(n *corev1.Node) nodeVersion {
	domain := n.Labels[gpuv1.LabelGPUClique]
	if domain == "" {
		domain = n.Annotations[gpuv1.AnnotationNVLinkDomain]
	}
	return nodeVersion{rv: rvOf(n), seen: time.Now(), labels: n.Labels, unschedulable: n.Spec.Unschedulable,
		gone: n.DeletionTimestamp != nil, domain: domain,
		unhealthyTaint: slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint),
		migTaint:       slices.ContainsFunc(n.Spec.Taints, gating.IsOwnMIGTaint),
		switchTaint:    slices.ContainsFunc(n.Spec.Taints, gating.IsOwnModeSwitchTaint)}
}

// watchGaps is how many times the recording listed again.
func (r *recorder) watchGaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}

// targetNode is the node a pod is for: its binding, or, before the
// scheduler bound it, the node its DaemonSet's affinity names.
func targetNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// nodeAt returns the node as it was just before revision rv.
func (r *recorder) nodeAt(name string, rv uint64) (nodeVersion, bool) {
	versions := r.nodes[name]
	i := sort.Search(len(versions), func(i int) bool { return versions[i].rv >= rv })
	if i == 0 {
		return nodeVersion{}, false
	}
	return versions[i-1], true
}

// leftReadyAt returns when, before revision rv, a node's state label last
// left ready, as the recording saw it; false if it never was ready
// before rv.
func (r *recorder) leftReadyAt(name, label string, rv uint64) (time.Time, bool) {
	var left time.Time
	wasReady := false
	for _, v := range r.nodes[name] {
		if v.rv >= rv {
			break
		}
		ready := v.labels[label] == string(gpuv1.StateReady)
		if wasReady && !ready {
			left = v.seen
		}
		wasReady = ready
	}
	return left, !left.IsZero()
}

// policyAt reports whether an active ClusterPolicy existed just before rv.
func (r *recorder) policyAt(rv uint64) bool {
	present := false
	for _, p := range r.policies {
		if p.rv >= rv {
			break
		}
		present = p.present
	}
	return present
}

// sortAll orders every history by revision; the watches deliver each kind
// in order, but the initial lists and restarts may not.
func (r *recorder) sortAll() {
	for _, v := range r.nodes {
		sort.SliceStable(v, func(i, j int) bool { return v[i].rv < v[j].rv })
	}
	sort.SliceStable(r.pods, func(i, j int) bool { return r.pods[i].rv < r.pods[j].rv })
	sort.SliceStable(r.policies, func(i, j int) bool { return r.policies[i].rv < r.policies[j].rv })
}

// upgradeState is a node version's driver upgrade state.
func (v nodeVersion) upgradeState() gpuv1.UpgradeState {
	return gpuv1.UpgradeState(v.labels[gpuv1.LabelUpgradeState])
}

// phase is where an operation stands in a node version, as the arbiter
// reads its label.
func (v nodeVersion) phase(op arbiter.Operation) arbiter.Phase {
	switch op {
	case arbiter.DriverUpgrade:
		return arbiter.UpgradePhase(v.upgradeState(), true)
	case arbiter.Repair:
		return arbiter.RepairPhase(gpuv1.RemediationState(v.labels[gpuv1.LabelRemediationState]), true)
	case arbiter.ModeSwitch:
		return arbiter.ModeSwitchPhase(gpuv1.ModeSwitchState(v.labels[gpuv1.LabelModeSwitchState]), true)
	}
	return arbiter.MIGPhase(gpuv1.MIGReconfigureState(v.labels[gpuv1.LabelMIGReconfigureState]), true)
}
