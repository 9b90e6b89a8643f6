package maintenance

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/policy"
)

// Plan is what the maintenance looks will do from now on, as the next
// look judges it, writing nothing: the starts that wait for a place, in
// the order Admit serves them, and the pods each start would evict.
type Plan struct {
	Starts []PlannedStart `json:"starts"`
	// Budgets are the budgets the starts must fit, as their fields say.
	Budgets []string `json:"budgets"`
}

// PlannedStart is one queued operation on one node.
type PlannedStart struct {
	Node      string    `json:"node"`
	Pool      string    `json:"pool"`
	Operation string    `json:"operation"`
	Since     time.Time `json:"since,omitzero"`
	// Next is true when it starts at the next look; else Waiting says
	// for what.
	Next    bool   `json:"next"`
	Waiting string `json:"waiting,omitempty"`
	// Evicts are the pods (namespace/name) its evictions ask to leave;
	// Blocked those that would keep it waiting, each with why. Empty
	// past the plan's detail limit (Detailed false).
	Detailed bool     `json:"detailed"`
	Evicts   []string `json:"evicts,omitempty"`
	Blocked  []string `json:"blocked,omitempty"`
}

// Plan judges the fleet as the next look would, and lists the pods of
// the first detail starts live (each a list of its node's pods).
func (r *Reconciler) Plan(ctx context.Context, detail int) (Plan, error) {
	out := Plan{}
	active, err := policy.Active(ctx, r.Client)
	if err != nil || active == nil {
		return out, err
	}
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list); err != nil {
		return out, fmt.Errorf("listing nodes: %w", err)
	}
	obs, err := r.observe(ctx)
	if err != nil {
		return out, err
	}
	p, err := r.newPass(ctx, active, obs)
	if err != nil {
		return out, err
	}
	var nodes []*corev1.Node
	var views []arbiter.Node
	for i := range list.Items {
		n := &list.Items[i]
		for _, m := range p.machines {
			if m.runs(p, n) {
				nodes = append(nodes, n)
				views = append(views, p.view(ctx, n))
				break
			}
		}
	}
	admission, _ := arbiter.Admit(views, p.budgets)
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := r.APIReader.List(ctx, pdbs); err != nil {
		return out, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	for i, q := range arbiter.Queue(views, arbiter.Admission{}) {
		s := PlannedStart{Node: q.Node.Name, Pool: q.Node.Pool, Operation: q.Op.String(), Since: q.Node.Ops[q.Op].Since}
		s.Waiting = admission.Waiting[q.Node.Name]
		if op, ok := admission.Admitted[q.Node.Name]; ok {
			// A node queued for several operations starts one of them.
			if s.Next = op == q.Op; !s.Next {
				s.Waiting = fmt.Sprintf("the %s starts on the node first", op)
			}
		}
		if i < detail {
			if err := r.planPods(ctx, p, byName[q.Node.Name], q.Op, pdbs.Items, &s); err != nil {
				return out, err
			}
		}
		out.Starts = append(out.Starts, s)
	}
	seen := map[string]bool{}
	for _, list := range p.budgets {
		for _, b := range list {
			desc := fmt.Sprintf("%s=%s", b.Field, b.Limit.String())
			if !seen[desc] {
				seen[desc] = true
				out.Budgets = append(out.Budgets, desc)
			}
		}
	}
	return out, nil
}

// planPods fills in the pods op's evictions would ask to leave n, and
// those that would keep it waiting: left in place by the settings, or
// protected by a PodDisruptionBudget that allows no disruption now.
func (r *Reconciler) planPods(ctx context.Context, p *pass, n *corev1.Node, op arbiter.Operation,
	pdbs []policyv1.PodDisruptionBudget, s *PlannedStart) error {
	evictions := []eviction{p.gpuPodEviction(ctx, n, op)}
	if drain, on := p.drainEviction(n); op == arbiter.DriverUpgrade && on {
		evictions = append(evictions, drain)
	}
	seen := map[string]bool{}
	for _, e := range evictions {
		evictable, stays, err := r.evictionOf(ctx, n.Name, e)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		for _, pod := range evictable {
			name := pod.Namespace + "/" + pod.Name
			if seen[name] {
				continue
			}
			seen[name] = true
			if pdb := blockingPDB(pod, pdbs); pdb != "" {
				s.Blocked = append(s.Blocked, fmt.Sprintf("%s: PodDisruptionBudget %s allows no disruption now", name, pdb))
				continue
			}
			s.Evicts = append(s.Evicts, name)
		}
		for _, st := range stays {
			name := st.Pod.Namespace + "/" + st.Pod.Name
			if !seen[name] {
				seen[name] = true
				s.Blocked = append(s.Blocked, name+": "+st.Why)
			}
		}
	}
	s.Detailed = true
	return nil
}

// blockingPDB names the PodDisruptionBudget of the pod's namespace that
// selects it and allows no disruption now, as the Eviction API would
// refuse it; "" when none does.
func blockingPDB(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) string {
	for i := range pdbs {
		pdb := &pdbs[i]
		if pdb.Namespace != pod.Namespace || pdb.Status.DisruptionsAllowed > 0 {
			continue
		}
		// A PodDisruptionBudget without a selector selects no pod (policy/v1);
		// LabelSelectorAsSelector reads nil as that.
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err == nil && sel.Matches(labels.Set(pod.Labels)) {
			return pdb.Name
		}
	}
	return ""
}
