package clusterpolicy

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
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

// summarizeShares counts the GPU nodes per state from their shares (in
// the nodes' order), read from their labels. Cluster-wide states count the
// pods of their DaemonSet instead (nfd-worker, on every node), from ds,
// which is nil when it does not exist.
func summarizeShares(g *state.Graph, enabled map[state.Name]bool, nodes []*corev1.Node, shares []*nodeShare, ds *appsv1.DaemonSet) summary {
	s := summary{byState: map[state.Name]*stateCounts{}, upgrades: map[gpuv1.UpgradeState]int{}, unhealthy: map[string]int64{},
		firstNotUp: map[string]state.Name{}, pools: map[string]*poolCounts{}, operations: map[[2]string]int{}}
	for _, st := range g.States() {
		s.order = append(s.order, st.Name)
		s.byState[st.Name] = &stateCounts{enabled: enabled[st.Name], phases: map[gpuv1.StateValue]int{}}
	}
	perNode := g.PerNode()
	counts := make([]*stateCounts, len(perNode))
	for i, name := range perNode {
		counts[i] = s.byState[name]
	}
	for i := range nodes {
		n, share := nodes[i], shares[i]
		if !share.gpu {
			continue
		}
		s.gpuNodes++
		if share.unhealthy > 0 {
			s.unhealthy[n.Name] = share.unhealthy
		}
		if share.waiting != "" {
			s.waiting = append(s.waiting, share.waiting)
		}
		if u := share.upgrade; u != "" {
			s.upgrades[u]++
			if u == gpuv1.UpgradeFailed {
				s.upgradeFailed = append(s.upgradeFailed, n.Name)
			}
		}
		for _, op := range share.operations {
			s.operations[op]++
		}
		allUp := true
		for j, name := range perNode {
			v := share.values[j]
			if allUp && !v.Up() {
				s.firstNotUp[n.Name] = name
			}
			allUp = allUp && v.Up()
			c := counts[j]
			c.phases[v]++
			switch v {
			case gpuv1.StateDisabled:
				c.disabled++
				if name == state.Driver && enabled[name] && share.hostDriver != "" {
					c.hostDriver = append(c.hostDriver, share.hostDriver)
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
		pool := s.pools[share.pool]
		if pool == nil {
			pool = &poolCounts{}
			s.pools[share.pool] = pool
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
