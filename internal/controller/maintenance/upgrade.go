package maintenance

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// Field owners of a node's upgrade, apart from the node controller's
// labels.
const (
	// FieldOwner manages the cordon the upgrade holds and the annotation
	// that says so (AnnotationCordoned), written together once when it
	// cordons and dropped together when it uncordons: one write, so that
	// no conflict between two writes (the node lifecycle controller
	// taints a cordoned node at once) loses which cordon is the
	// upgrade's. A person who cordons the node meanwhile (uncordon, then
	// cordon) takes the field over, and the cordon stays theirs. (It
	// managed the label and annotations too before StateFieldOwner did;
	// its next write leaves them to StateFieldOwner.)
	FieldOwner = "gpu-operator-upgrade"
	// StateFieldOwner manages the upgrade label and annotations.
	StateFieldOwner = "gpu-operator-upgrade-state"
)

// Annotations of a node's upgrade.
const (
	// AnnotationSince is when the node entered its upgrade state.
	AnnotationSince = gpuv1.UpgradeAnnotationPrefix + "since"
	// AnnotationCordoned is set when the upgrade cordoned the node; a node
	// cordoned before stays cordoned after.
	AnnotationCordoned = gpuv1.UpgradeAnnotationPrefix + "cordoned"
	// AnnotationOutdatedPod is, on an upgrade-required node, the UID of the
	// outdated driver pod the upgrade is to replace: a current pod of
	// another UID was put there by someone else, over the driver still
	// loaded. An upgrade that follows such a replacement keeps it to its
	// end, failed included: relabelled upgrade-required to retry, the node
	// is known to have been replaced by hand still.
	AnnotationOutdatedPod = gpuv1.UpgradeAnnotationPrefix + "outdated-pod"
	// AnnotationByHand marks an upgrade that follows a driver pod replaced
	// outside it: where autoUpgrade is off, driver.manager's settings say
	// how its GPU pods leave.
	AnnotationByHand = gpuv1.UpgradeAnnotationPrefix + "by-hand"
)

// upgradeEvent is the reason of the events on a node's upgrade.
const upgradeEvent = "GPUDriverUpgrade"

// upgrades is the driver upgrade's machine.
type upgrades struct{}

func (upgrades) operation() arbiter.Operation { return arbiter.DriverUpgrade }

// runs: the operator's driver runs on the node. Nodes on their host's
// driver have none to upgrade; one that moved there mid-upgrade is let go
// (uncordoned).
func (upgrades) runs(p *pass, n *corev1.Node) bool {
	st := stateOf(n)
	return p.cp != nil && p.cp.Spec.Driver.IsEnabled() && gating.IsGPUNode(n) &&
		deployed(n, state.Driver, st != "" && st != gpuv1.UpgradeDone && n.Annotations[AnnotationSince] != "") &&
		n.Labels[gpuv1.LabelDriverRoot] != string(gpuv1.DriverRootHost)
}

// deployed reports whether the node runs a state's operand for its
// machine: its deploy label true (or NVIDIA's paused-for-mig-change), or
// absent while the machine's operation is in flight (its state, with this
// operator's since annotation: a state label another operator left on a
// node this one has not labelled yet is no operation of its own). A person who deletes
// the label, rather than setting it to false, has not opted out, and the
// node controller writes it back: the operation goes on, as after a
// flap of NFD's label, and ends only by an opt-out (gating.OptedOut). A
// node never labelled yet starts nothing before the node controller has
// labelled it.
func deployed(n *corev1.Node, name state.Name, inFlight bool) bool {
	if gating.OptedOut(n.Labels, name) {
		return false
	}
	_, has := n.Labels[gpuv1.DeployLabel(string(name))]
	return has || inFlight
}

func (upgrades) position(_ context.Context, p *pass, n *corev1.Node, view *arbiter.Node) {
	replaced, _ := p.outdatedPodFate(n)
	view.Ops[arbiter.DriverUpgrade] = arbiter.Position{
		Phase: arbiter.UpgradePhase(stateOf(n), upgradeQueued(n, autoUpgrade(p.upgradeSpec(n)), replaced)),
		Since: sinceOf(n, AnnotationSince),
	}
}

// upgradeQueued says whether an upgrade-required node starts once the
// table and the budget let it: autoUpgrade on in its pool, or a driver pod
// replaced by hand whose GPU pods must leave; never a node labelled skip,
// and not while the node is not Ready. A node whose kubelet is gone can
// neither let its pods go nor run the new driver: started, it would hold
// a place of maxParallelUpgrades through its drain and validation
// timeouts, then wait failed for a person. It starts once it is Ready
// again, as a MIG change and an allocation mode switch do.
func upgradeQueued(n *corev1.Node, autoUpgrade, replacedByHand bool) bool {
	return (autoUpgrade || replacedByHand) && n.Labels[gpuv1.LabelUpgradeSkip] != gpuv1.LabelTrue && nodeReady(n)
}

func (u upgrades) step(ctx context.Context, p *pass, n *corev1.Node, t turn) (stepped, error) {
	f, err := p.r.facts(ctx, p, n)
	if err != nil {
		return stepped{node: n}, err
	}
	f.Admitted = t.admitted()
	pol := p.upgradePolicy(n)
	queued := upgradeQueued(n, pol.AutoUpgrade, f.ReplacedByHand)
	if byHand := p.byHandOf(n); byHand != nil && !pol.AutoUpgrade && (f.ReplacedByHand || followsByHand(n)) {
		pol = p.policyOf(&byHand.Spec)
		pol.SkipGPUPodEviction, pol.LeaveReplaced = !byHand.Evicts, !byHand.Acts()
	}
	// Its timeouts read the node's one clock; the state is written with
	// its own time.
	clocked := f
	clocked.Since = t.clock(f.Since, f.Now)
	step := upgrade.Next(clocked, pol)
	log, logs := verbose(ctx)
	if ok, why := t.vet(arbiter.UpgradePhase(f.State, queued), arbiter.UpgradePhase(step.Next, queued)); !ok {
		if logs {
			log.Info("upgrade step held back", "node", n.Name, "state", f.State, "next", step.Next, "why", why)
		}
		step = upgrade.Step{Next: f.State}
	}
	if logs {
		log.Info("upgrade step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
	}
	keep := t.keepForward(&f.Since, f.Now, pol.ValidationTimeout, step.Next == f.State)
	node, next, err := p.r.takeUpgrade(ctx, p, n, f, step, keep)
	p.tally.count(next)
	return stepped{node: node, busy: upgrade.InProgress(next) || next == gpuv1.UpgradeRequired}, err
}

func (upgrades) forget(ctx context.Context, p *pass, n *corev1.Node) error {
	if err := p.r.forgetUpgrade(ctx, n); err != nil {
		return err
	}
	return p.r.deleteOrphan(ctx, p.obs, n)
}

// takeUpgrade performs a step's action and records the node's next state.
// A failed action leaves the state as it is, to be retried.
// keep writes the state again with f.Since, its time kept forward while
// its validation is paused.
func (r *Reconciler) takeUpgrade(ctx context.Context, p *pass, n *corev1.Node, f upgrade.Facts,
	step upgrade.Step, keep bool) (*corev1.Node, gpuv1.UpgradeState, error) {
	cordoned := n.Annotations[AnnotationCordoned] == gpuv1.LabelTrue
	var err error
	switch step.Action {
	case upgrade.Cordon:
		// The upgrade holds the cordon only if the node was schedulable:
		// a node cordoned by someone before stays cordoned after.
		cordoned = cordoned || !n.Spec.Unschedulable
	case upgrade.EvictGPUPods:
		err = r.evict(ctx, n, upgradeEvent, p.gpuPodEviction(ctx, n, arbiter.DriverUpgrade))
	case upgrade.Drain:
		drain, _ := p.drainEviction(n)
		err = r.evict(ctx, n, upgradeEvent, drain)
	case upgrade.DeleteDriverPod:
		err = r.deleteDriverPod(ctx, n, p.obs)
	case upgrade.Uncordon:
		cordoned = false
	}
	if err != nil {
		return n, f.State, fmt.Errorf("node %s, %s: %w", n.Name, step.Action, err)
	}
	held := n.Annotations[AnnotationCordoned] == gpuv1.LabelTrue
	if step.Next == f.State && cordoned == held && !keep {
		return n, f.State, nil
	}
	// The cordon goes on before the label that says so, and comes off
	// before the label that ends the upgrade: a restart between the two
	// writes takes the same step again.
	if cordoned != held {
		written, err := r.writeCordon(ctx, n, cordoned)
		if err != nil {
			return n, f.State, err
		}
		n = written
	}
	written, err := r.writeUpgrade(ctx, n, step, f, p.obs.driverPods[n.Name], p.holdOf(n))
	if err != nil {
		return n, f.State, err
	}
	if step.Next != f.State && !step.FirstMark {
		kind := corev1.EventTypeNormal
		if step.Next == gpuv1.UpgradeFailed {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(n, nil, kind, upgradeEvent, "Upgrade", "%s -> %s: %s", displayState(f.State), step.Next, step.Reason)
	}
	return written, step.Next, nil
}

// writeCordon cordons the node and marks the cordon the upgrade's, or
// drops both, on the version of the node the step was decided from.
// Server-side apply uncordons by dropping the field: a person who took it
// over meanwhile keeps the node cordoned.
func (r *Reconciler) writeCordon(ctx context.Context, n *corev1.Node, cordon bool) (*corev1.Node, error) {
	ac := corev1ac.Node(n.Name).WithResourceVersion(n.ResourceVersion)
	if cordon {
		ac.WithSpec(corev1ac.NodeSpec().WithUnschedulable(true)).WithAnnotations(map[string]string{AnnotationCordoned: gpuv1.LabelTrue})
	}
	return r.apply(ctx, ac, FieldOwner, "the upgrade's cordon")
}

// writeUpgrade applies the node's upgrade label and annotations in one
// request on the version of the node the step was decided from: a
// decision taken on a stale cache (a second reconcile before the first
// one's write arrived) fails with a conflict (errStale) and is taken
// again, rather than undoing what the first wrote. It returns the node as
// written.
func (r *Reconciler) writeUpgrade(ctx context.Context, n *corev1.Node, step upgrade.Step, f upgrade.Facts, pod *operandpods.Pod,
	h hold) (*corev1.Node, error) {
	st := step.Next
	since := f.Since
	if st != f.State {
		since = f.Now
	}
	annotations := upgradeMarks(n, st, step.ByHand, f.State, pod)
	annotations[AnnotationSince] = since.UTC().Format(time.RFC3339)
	labels := map[string]string{}
	if st != "" {
		labels[gpuv1.LabelUpgradeState] = string(st)
	}
	h.mark(annotations, upgrade.Holds(st))
	ac := corev1ac.Node(n.Name).WithResourceVersion(n.ResourceVersion).WithLabels(labels).WithAnnotations(annotations)
	return r.apply(ctx, ac, StateFieldOwner, "the upgrade state")
}

// forgetUpgrade removes the upgrade label and annotations, and the cordon
// the upgrade held, from a node it no longer upgrades: an empty apply of
// each owner drops every field the upgrade owns.
func (r *Reconciler) forgetUpgrade(ctx context.Context, n *corev1.Node) error {
	_, labelled := n.Labels[gpuv1.LabelUpgradeState]
	_, since := n.Annotations[AnnotationSince]
	if !labelled && !since {
		return nil
	}
	for _, owner := range []string{FieldOwner, StateFieldOwner} {
		if err := r.Client.Apply(ctx, corev1ac.Node(n.Name), client.FieldOwner(owner), client.ForceOwnership); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("forgetting the upgrade of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// apply applies a node's apply configuration, conditional on the version
// it names, and returns the node as written, trimmed as the cache trims
// nodes: the next write of the same look is conditional on it. A conflict
// or a deleted node is errStale.
func (r *Reconciler) apply(ctx context.Context, ac *corev1ac.NodeApplyConfiguration, owner, what string) (*corev1.Node, error) {
	name := *ac.Name
	var base string
	if ac.ResourceVersion != nil {
		base = *ac.ResourceVersion
	}
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil, errStale // decided on a stale node: the watch brings it back fresh
		}
		return nil, fmt.Errorf("writing %s of node %s: %w", what, name, err)
	}
	written, err := asNode(ac)
	switch {
	case err != nil:
		return nil, err
	case base == "":
		return r.trim(written), nil
	}
	return r.remember(base, written), nil
}

// domainOf is the node's NVLink domain: GFD's label, or, while GFD is off
// the node, the one an operation holding it kept.
func domainOf(n *corev1.Node) string {
	if d := n.Labels[gpuv1.LabelGPUClique]; d != "" {
		return d
	}
	return n.Annotations[gpuv1.AnnotationNVLinkDomain]
}

func stateOf(n *corev1.Node) gpuv1.UpgradeState {
	return gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState])
}

// sinceOf reads a since annotation; zero when absent or unreadable.
func sinceOf(n *corev1.Node, key string) time.Time {
	t, _ := stamp(n.Annotations[key])
	return t
}

// stamp reads an RFC 3339 time an annotation keeps; false when it is
// absent or unreadable. An absent one is not parsed: each look reads
// every node's stamps, and a failed parse allocates its error.
func stamp(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

func displayState(s gpuv1.UpgradeState) string {
	if s == "" {
		return "up to date"
	}
	return string(s)
}

// evictionSpec is the settings the node's upgrade evicts and drains by,
// with their pod selectors: driver.manager's where the upgrade follows a
// driver pod replaced by hand and autoUpgrade is off (NVIDIA's
// upgradePolicy supersedes its driver manager's settings where it is on),
// else the pool's upgrade policy.
func (p *pass) evictionSpec(n *corev1.Node) (*gpuv1.DriverUpgradePolicySpec, *podSelectors) {
	if followsByHand(n) && !autoUpgrade(p.upgradeSpec(n)) {
		if b := p.byHandOf(n); b != nil {
			return &b.Spec, b.sel
		}
	}
	return p.upgradeSpec(n), p.selectors(n)
}

// upgradeSpec is the upgrade settings of the node's driver pool: an
// NVIDIADriver's own, else the policy's.
func (p *pass) upgradeSpec(n *corev1.Node) *gpuv1.DriverUpgradePolicySpec {
	if pool := p.obs.pools.Pool(p.poolOf(n)); pool != nil {
		return &pool.Driver.UpgradePolicy
	}
	return &p.cp.Spec.Driver.UpgradePolicy
}

// upgradePolicy is the node's pool's upgrade settings and the operator's
// timers, as the transition table reads them.
func (p *pass) upgradePolicy(n *corev1.Node) upgrade.Policy { return p.policyOf(p.upgradeSpec(n)) }

// autoUpgrade reads an upgrade policy's autoUpgrade, on unless set off.
func autoUpgrade(spec *gpuv1.DriverUpgradePolicySpec) bool {
	return spec.AutoUpgrade == nil || *spec.AutoUpgrade
}

// policyOf is an upgrade policy's settings and the operator's timers, as
// the transition table reads them.
func (p *pass) policyOf(spec *gpuv1.DriverUpgradePolicySpec) upgrade.Policy {
	seconds := func(v *int32) time.Duration {
		if v == nil {
			return 0
		}
		return time.Duration(*v) * time.Second
	}
	return upgrade.Policy{
		AutoUpgrade:        autoUpgrade(spec),
		WaitTimeout:        seconds(spec.WaitForCompletion.TimeoutSeconds),
		PodDeletionTimeout: seconds(spec.PodDeletion.TimeoutSeconds),
		DrainEnabled:       spec.Drain.Enable != nil && *spec.Drain.Enable,
		DrainTimeout:       seconds(spec.Drain.TimeoutSeconds),
		ValidationTimeout:  p.r.Timers.DriverValidationTimeout,
		PodRestartTimeout:  p.r.Timers.DriverReplaceTimeout,
	}
}
