package clusterpolicy

import (
	"cmp"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// stateCounts counts the GPU nodes of one state.
type stateCounts struct {
	enabled                bool
	desired, ready, failed int32
	phases                 map[gpuv1.StateValue]int
	disabled               int32
	// notReady and failedNodes name nodes, sorted; a message shows a few.
	notReady, failedNodes []string
	// hostDriver names the nodes that use the driver on their host while
	// the policy deploys the driver container, with why; driver only.
	hostDriver []string
}

// summary is what the status says about the GPU nodes.
type summary struct {
	gpuNodes, readyNodes int
	order                []state.Name
	byState              map[state.Name]*stateCounts
	// upgrades counts GPU nodes by their driver upgrade state;
	// upgradeFailed names, sorted, the nodes whose upgrade failed.
	upgrades      map[gpuv1.UpgradeState]int
	upgradeFailed []string
	// why says, for the nodes the status names, why each state is not
	// ready there: node -> state -> reason.
	why map[string]map[state.Name]string
	// unhealthy maps the GPU nodes with unhealthy GPUs to how many.
	unhealthy map[string]int64
	// waiting names, sorted, the nodes an operation waits to start on,
	// each with why (gpuv1.AnnotationMaintenanceWaiting).
	waiting []string
	// firstNotUp maps each GPU node not up on every state to the first
	// state of the chain that is not.
	firstNotUp map[string]state.Name
	// pools counts each driver pool's GPU nodes and those up on every
	// state; nodes without a pool count under "default".
	pools map[string]*poolCounts
	// operations counts the GPU nodes by maintenance operation and its
	// state there, done excluded.
	operations map[[2]string]int
}

// poolCounts counts a driver pool's GPU nodes.
type poolCounts struct{ nodes, ready int }

// summarize counts the GPU nodes per state from their labels. Cluster-wide
// states count the pods of their DaemonSet instead (nfd-worker, on every
// node), from ds, which is nil when it does not exist.
func summarize(g *state.Graph, enabled map[state.Name]bool, nodes []corev1.Node, ds *appsv1.DaemonSet) summary {
	s := summary{byState: map[state.Name]*stateCounts{}, upgrades: map[gpuv1.UpgradeState]int{}, unhealthy: map[string]int64{},
		firstNotUp: map[string]state.Name{}, pools: map[string]*poolCounts{}, operations: map[[2]string]int{}}
	operations := gating.Operations()
	for _, st := range g.States() {
		s.order = append(s.order, st.Name)
		s.byState[st.Name] = &stateCounts{enabled: enabled[st.Name], phases: map[gpuv1.StateValue]int{}}
	}
	perNode := g.PerNode()
	for i := range nodes {
		n := &nodes[i]
		if !gating.IsGPUNode(n) {
			continue
		}
		s.gpuNodes++
		if u := gating.UnhealthyGPUsOf(n); u > 0 {
			s.unhealthy[n.Name] = u
		}
		if why := n.Annotations[gpuv1.AnnotationMaintenanceWaiting]; why != "" {
			s.waiting = append(s.waiting, fmt.Sprintf("%s (%s)", n.Name, why))
		}
		if u := gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]); u != "" {
			s.upgrades[u]++
			if u == gpuv1.UpgradeFailed {
				s.upgradeFailed = append(s.upgradeFailed, n.Name)
			}
		}
		for _, op := range operations {
			if st := op.StateOn(n); st != "" {
				s.operations[[2]string{op.Name, st}]++
			}
		}
		allUp := true
		for _, name := range perNode {
			v := g.ValueOf(name, n.Labels)
			if allUp && !v.Up() {
				s.firstNotUp[n.Name] = name
			}
			allUp = allUp && v.Up()
			c := s.byState[name]
			c.phases[v]++
			switch v {
			case gpuv1.StateDisabled:
				c.disabled++
				if name == state.Driver && enabled[name] && n.Labels[gpuv1.LabelDeployOperands] != "false" {
					c.hostDriver = append(c.hostDriver, fmt.Sprintf("%s (%s)", n.Name, hostDriverReason(n)))
				}
				continue
			case gpuv1.StateReady:
				c.ready++
			case gpuv1.StateFailed:
				c.failed++
				c.failedNodes = append(c.failedNodes, n.Name)
				c.notReady = append(c.notReady, n.Name)
			default:
				c.notReady = append(c.notReady, n.Name)
			}
			c.desired++
		}
		poolName := cmp.Or(n.Labels[gpuv1.LabelDriverPool], "default")
		pool := s.pools[poolName]
		if pool == nil {
			pool = &poolCounts{}
			s.pools[poolName] = pool
		}
		pool.nodes++
		if allUp {
			s.readyNodes++
			pool.ready++
		}
	}
	for _, c := range s.byState {
		slices.Sort(c.notReady)
		slices.Sort(c.failedNodes)
		slices.Sort(c.hostDriver)
	}
	for _, st := range g.States() {
		if st.Scope == state.ClusterWide && enabled[st.Name] && ds != nil {
			c := s.byState[st.Name]
			c.desired, c.ready = ds.Status.DesiredNumberScheduled, ds.Status.NumberReady
		}
	}
	return s
}

// hostDriverReason says why a node with the driver enabled in the policy
// uses the driver on its host.
func hostDriverReason(n *corev1.Node) string {
	if found := n.Annotations[gpuv1.AnnotationHostDriver]; found != "" {
		return found
	}
	key := gpuv1.DeployLabel(string(state.Driver))
	return key + "=" + n.Labels[key]
}
