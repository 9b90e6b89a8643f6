package clusterpolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// maxNamedNodes bounds how many nodes a condition message names.
const maxNamedNodes = 10

// problems are what keeps the policy from being carried out as written.
type problems struct {
	// apply is the error of applying the objects, if any.
	apply error
	// missing says, for each thing the policy asks for that the cluster
	// lacks, what it is and how to fix it.
	missing []string
}

// buildStatus is the status of the active policy.
func buildStatus(cp *gpuv1.ClusterPolicy, namespace string, s summary, p problems) gpuv1.ClusterPolicyStatus {
	applyErr := p.apply
	st := gpuv1.ClusterPolicyStatus{
		Namespace:          namespace,
		ObservedGeneration: cp.Status.ObservedGeneration,
		ReadyNodes:         fmt.Sprintf("%d/%d", s.readyNodes, s.gpuNodes),
		Conditions:         append([]metav1.Condition(nil), cp.Status.Conditions...),
		IgnoredFields:      cp.Spec.RefusedFields(),
	}
	if applyErr == nil {
		st.ObservedGeneration = cp.Generation
	}
	st.GPUHealth = gpuHealth(s.unhealthy)
	for _, name := range s.order {
		c := s.byState[name]
		if !c.enabled {
			continue
		}
		summary := gpuv1.StateSummary{Name: string(name), Desired: c.desired, Ready: c.ready, Failed: c.failed, Disabled: c.disabled,
			Message: stateMessage(name, c, s.why)}
		st.States = append(st.States, summary)
	}
	// Ready and Progressing describe the nodes, which follow the last
	// generation applied; Degraded describes this generation, whose apply
	// may have failed.
	setReadyCondition(&st.Conditions, s, st.ObservedGeneration)
	setProgressingCondition(&st.Conditions, s, st.ObservedGeneration)
	setDegradedCondition(&st.Conditions, s, p, cp.Generation)
	st.State = gpuv1.PolicyNotReady
	if meta.IsStatusConditionTrue(st.Conditions, gpuv1.ConditionReady) {
		st.State = gpuv1.PolicyReady
	}
	return st
}

// setReadyCondition is true when every GPU node is ready on every enabled
// state; otherwise it names the first state in order holding nodes back,
// and some of those nodes.
func setReadyCondition(conds *[]metav1.Condition, s summary, gen int64) {
	c := metav1.Condition{Type: gpuv1.ConditionReady, ObservedGeneration: gen}
	if name, counts := firstNotReady(s); counts != nil {
		c.Status, c.Reason = metav1.ConditionFalse, gpuv1.ReasonStateNotReady
		c.Message = fmt.Sprintf("%s is ready on %d of %d nodes", name, counts.ready, counts.desired)
		if len(counts.notReady) > 0 {
			c.Message += "; not ready: " + nameNodes(explained(name, counts.notReady, s.why))
		}
	} else {
		c.Status, c.Reason = metav1.ConditionTrue, gpuv1.ReasonAllStatesReady
		c.Message = fmt.Sprintf("%d of %d GPU nodes are ready on every state", s.readyNodes, s.gpuNodes)
		if s.gpuNodes == 0 {
			c.Message = "no GPU nodes found: nodes are GPU nodes once NFD labels them feature.node.kubernetes.io/pci-10de.present=true, or when labelled nvidia.com/gpu.present=true"
		}
	}
	meta.SetStatusCondition(conds, c)
}

func firstNotReady(s summary) (state.Name, *stateCounts) {
	for _, name := range s.order {
		if c := s.byState[name]; c.enabled && c.ready < c.desired {
			return name, c
		}
	}
	return "", nil
}

// setProgressingCondition is true while nodes are on their way to ready.
func setProgressingCondition(conds *[]metav1.Condition, s summary, gen int64) {
	c := metav1.Condition{Type: gpuv1.ConditionProgressing, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: gpuv1.ReasonRolloutComplete, Message: "no node is on its way"}
	var parts []string
	for _, name := range s.order {
		counts := s.byState[name]
		if n := counts.phases[gpuv1.StatePending] + counts.phases[gpuv1.StateUpgrading]; n > 0 && counts.enabled {
			parts = append(parts, fmt.Sprintf("%s pending on %d", name, n))
		}
	}
	if len(parts) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, gpuv1.ReasonRollingOut
		c.Message = fmt.Sprintf("%d of %d GPU nodes ready; %s", s.readyNodes, s.gpuNodes, strings.Join(parts, ", "))
	}
	if msg, rolling := upgradeProgress(s); rolling {
		// An upgrade is the longer story: it names how far it got.
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, gpuv1.ReasonDriverUpgrade, msg
	}
	if len(s.waiting) > 0 {
		// The operations waiting to start say why: a full budget, or
		// another operation holding the node.
		slices.Sort(s.waiting)
		if c.Status != metav1.ConditionTrue {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, gpuv1.ReasonMaintenanceWaiting, ""
		} else {
			c.Message += "; "
		}
		verb := "nodes wait"
		if len(s.waiting) == 1 {
			verb = "node waits"
		}
		c.Message += fmt.Sprintf("%d %s for maintenance: %s", len(s.waiting), verb, nameNodes(s.waiting))
		if len(c.Message) > maxMessage {
			c.Message = c.Message[:maxMessage-3] + "..."
		}
	}
	meta.SetStatusCondition(conds, c)
}

// upgradeProgress tells how far a driver upgrade got, and whether one is
// rolling: some node waits for it or is in it.
func upgradeProgress(s summary) (string, bool) {
	inProgress, waiting := 0, s.upgrades[gpuv1.UpgradeRequired]
	for st, n := range s.upgrades {
		if upgrade.InProgress(st) {
			inProgress += n
		}
	}
	if inProgress == 0 && waiting == 0 {
		return "", false
	}
	total := inProgress + waiting + s.upgrades[gpuv1.UpgradeDone] + s.upgrades[gpuv1.UpgradeFailed]
	return fmt.Sprintf("driver upgrade: %d of %d nodes done, %d in progress, %d waiting, %d failed",
		s.upgrades[gpuv1.UpgradeDone], total, inProgress, waiting, s.upgrades[gpuv1.UpgradeFailed]), true
}

// setDegradedCondition is true when objects could not be applied, a state
// or a driver upgrade failed on some node, or the policy asks for something
// the cluster lacks.
func setDegradedCondition(conds *[]metav1.Condition, s summary, p problems, gen int64) {
	c := metav1.Condition{Type: gpuv1.ConditionDegraded, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: gpuv1.ReasonNoFailures, Message: "no state failed on any node"}
	var parts []string
	for _, name := range s.order {
		if counts := s.byState[name]; counts.enabled && counts.failed > 0 {
			parts = append(parts, fmt.Sprintf("%s failed on %d nodes: %s", name, counts.failed, nameNodes(counts.failedNodes)))
		}
	}
	switch {
	case p.apply != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, gpuv1.ReasonApplyFailed, p.apply.Error()
	case len(parts) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, gpuv1.ReasonStateFailed
		c.Message = strings.Join(parts, "; ") + " (see the events of those nodes)"
	case len(s.upgradeFailed) > 0:
		slices.Sort(s.upgradeFailed)
		c.Status, c.Reason = metav1.ConditionTrue, gpuv1.ReasonUpgradeFailed
		c.Message = fmt.Sprintf("the driver upgrade failed on %d nodes: %s (they stay cordoned; see their events, "+
			"then label them %s=%s to retry)", len(s.upgradeFailed), nameNodes(s.upgradeFailed), gpuv1.LabelUpgradeState, gpuv1.UpgradeRequired)
	case len(p.missing) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, gpuv1.ReasonPrerequisiteMissing, strings.Join(p.missing, "; ")
	}
	meta.SetStatusCondition(conds, c)
}

// ignoredStatus is the status of a policy that is not the active one.
func ignoredStatus(cp, active *gpuv1.ClusterPolicy, namespace string) gpuv1.ClusterPolicyStatus {
	st := gpuv1.ClusterPolicyStatus{
		State:              gpuv1.PolicyIgnored,
		Namespace:          namespace,
		ObservedGeneration: cp.Generation,
		Conditions:         append([]metav1.Condition(nil), cp.Status.Conditions...),
		IgnoredFields:      cp.Spec.RefusedFields(),
	}
	msg := "another ClusterPolicy is being deleted; this one becomes active when it is gone"
	if active != nil {
		msg = fmt.Sprintf("ClusterPolicy %s is the active one, being the oldest; this one is ignored until %s is deleted", active.Name, active.Name)
	}
	for _, t := range []string{gpuv1.ConditionReady, gpuv1.ConditionProgressing, gpuv1.ConditionDegraded} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionFalse, Reason: gpuv1.ReasonIgnored, Message: msg, ObservedGeneration: cp.Generation,
		})
	}
	return st
}

// maxMessage bounds a state's message, as the CRD does.
const maxMessage = 4096

// stateMessage says what a person should know of a state across the
// nodes: which nodes use their host's driver, and which nodes it is not
// ready on, and why.
func stateMessage(name state.Name, c *stateCounts, why map[string]map[state.Name]string) string {
	var parts []string
	if len(c.hostDriver) > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes use the driver installed on their host: %s", len(c.hostDriver), nameNodes(c.hostDriver)))
	}
	if len(c.notReady) > 0 {
		parts = append(parts, "not ready on "+nameNodes(explained(name, c.notReady, why)))
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return msg
}

// explained adds to the first nodes why the state is not ready there,
// where known.
func explained(name state.Name, nodes []string, why map[string]map[state.Name]string) []string {
	out := slices.Clone(nodes)
	for i := range min(len(out), maxNamedNodes) {
		if w := why[out[i]][name]; w != "" {
			out[i] += " (" + w + ")"
		}
	}
	return out
}

// namedNodes returns the nodes the status names: the first few not ready
// on each state.
func (s summary) namedNodes() map[string]bool {
	named := map[string]bool{}
	for _, c := range s.byState {
		if !c.enabled {
			continue
		}
		for _, n := range c.notReady[:min(len(c.notReady), maxNamedNodes)] {
			named[n] = true
		}
	}
	return named
}

// nameNodes names up to maxNamedNodes nodes and counts the rest.
func nameNodes(nodes []string) string {
	if len(nodes) <= maxNamedNodes {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:maxNamedNodes], ", "), len(nodes)-maxNamedNodes)
}

// gpuHealth summarises the nodes with unhealthy GPUs; nil when none.
func gpuHealth(unhealthy map[string]int64) *gpuv1.GPUHealthSummary {
	if len(unhealthy) == 0 {
		return nil
	}
	h := &gpuv1.GPUHealthSummary{UnhealthyNodes: int32(len(unhealthy))}
	names := slices.Sorted(maps.Keys(unhealthy))
	named := make([]string, len(names))
	for i, n := range names {
		h.UnhealthyGPUs += int32(unhealthy[n])
		named[i] = fmt.Sprintf("%s (%d)", n, unhealthy[n])
	}
	h.Message = "unhealthy GPUs on " + nameNodes(named)
	return h
}
