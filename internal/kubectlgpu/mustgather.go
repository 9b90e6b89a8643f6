package kubectlgpu

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// logFetcher returns the last tail lines of a container's log; previous
// asks for the container's last run before its restart.
type logFetcher func(ctx context.Context, namespace, pod, container string, previous bool, tail int64) ([]byte, error)

// gatherer collects must-gather's archive.
type gatherer struct {
	c         client.Client
	logs      logFetcher
	graph     *state.Graph
	namespace string
	// nodes are the nodes whose operand pods' logs to take; empty picks
	// up to maxNodes GPU nodes not ready on every state.
	nodes    []string
	maxNodes int
	tail     int64
	// slicesServed says whether resource.k8s.io/v1 ResourceSlices are.
	slicesServed bool
}

// nvidiaDrivers are the DRA drivers whose ResourceSlices must-gather
// keeps: NVIDIA's GPU and ComputeDomain drivers.
var nvidiaDrivers = []string{"gpu.nvidia.com", "compute-domain.nvidia.com"}

// gather writes the archive to w, under directory dir.
func (g *gatherer) gather(ctx context.Context, w io.Writer, dir string, now time.Time) (manifest, error) {
	a := newArchive(w, dir, g.namespace, now)
	a.leftOut("Secrets: never read")
	steps := []func(context.Context, *archive) error{g.policies, g.nodesAndLogs, g.namespaced, g.events, g.resourceSlices}
	for _, step := range steps {
		if err := step(ctx, a); err != nil {
			return a.made, err
		}
	}
	return a.close()
}

// listed lists into list; a kind the server does not serve, or a list it
// refuses, is left out with why rather than ending the gather.
func (g *gatherer) listed(ctx context.Context, a *archive, what string, list client.ObjectList, opts ...client.ListOption) bool {
	if err := g.c.List(ctx, list, opts...); err != nil {
		if meta.IsNoMatchError(err) {
			a.leftOut("%s: not served by this cluster", what)
		} else {
			a.leftOut("%s: %v", what, err)
		}
		return false
	}
	return true
}

func (g *gatherer) policies(ctx context.Context, a *archive) error {
	for _, k := range []struct {
		file string
		list client.ObjectList
	}{
		{"clusterpolicies.yaml", &gpuv1.ClusterPolicyList{}},
		{"nvidiadrivers.yaml", &v1alpha1.NVIDIADriverList{}},
		{"gpuclusters.yaml", &v1alpha1.GPUClusterList{}},
	} {
		if !g.listed(ctx, a, k.file, k.list) {
			continue
		}
		if err := a.yaml("cluster/"+k.file, trimmed(k.list)); err != nil {
			return err
		}
	}
	return nil
}

// nodesAndLogs writes the GPU nodes' labels, annotations, taints and
// conditions, the operand pods of the namespace as a table, and the logs
// of the operator and of the chosen nodes' operand pods.
func (g *gatherer) nodesAndLogs(ctx context.Context, a *archive) error {
	nodes := &corev1.NodeList{}
	if !g.listed(ctx, a, "nodes", nodes) {
		return nil
	}
	var gpuNodes []corev1.Node
	for _, n := range nodes.Items {
		if gating.IsGPUNode(&n) {
			gpuNodes = append(gpuNodes, n)
		}
	}
	if err := a.yaml("nodes.yaml", nodeFacts(gpuNodes)); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if !g.listed(ctx, a, "pods in "+g.namespace, pods, client.InNamespace(g.namespace)) {
		return nil
	}
	if err := a.file("namespace/pods.txt", podTable(pods.Items)); err != nil {
		return err
	}
	a.made.Nodes, a.made.NodesWhy = g.chooseNodes(gpuNodes)
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Labels[render.LabelComponent] == "operator" && p.Labels[render.LabelName] == "gpu-operator":
			if err := g.podLogs(ctx, a, "logs/operator/", p); err != nil {
				return err
			}
		case slices.Contains(a.made.Nodes, p.Spec.NodeName):
			if err := a.yaml(fmt.Sprintf("logs/%s/%s.yaml", p.Spec.NodeName, p.Name), trimmed(p)); err != nil {
				return err
			}
			if err := g.podLogs(ctx, a, "logs/"+p.Spec.NodeName+"/", p); err != nil {
				return err
			}
		}
	}
	return nil
}

// chooseNodes are the nodes whose operand pods' logs the archive holds:
// the person's, else the first GPU nodes by name not ready on every
// state.
func (g *gatherer) chooseNodes(gpuNodes []corev1.Node) ([]string, string) {
	if len(g.nodes) > 0 {
		return g.nodes, "named with --node"
	}
	var notReady []string
	for i := range gpuNodes {
		if !g.graph.AllUp(gpuNodes[i].Labels) {
			notReady = append(notReady, gpuNodes[i].Name)
		}
	}
	slices.Sort(notReady)
	if len(notReady) > g.maxNodes {
		return notReady[:g.maxNodes], fmt.Sprintf("the first %d of %d GPU nodes not ready on every state; name others with --node",
			g.maxNodes, len(notReady))
	}
	if len(notReady) == 0 {
		return nil, "every GPU node is ready; name nodes with --node for their operand pods' logs"
	}
	return notReady, "the GPU nodes not ready on every state"
}

// podLogs adds each container's log, and its previous run's where it
// restarted.
func (g *gatherer) podLogs(ctx context.Context, a *archive, prefix string, p *corev1.Pod) error {
	restarts := map[string]int32{}
	for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		restarts[s.Name] = s.RestartCount
	}
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		for _, previous := range []bool{false, true} {
			if previous && restarts[c.Name] == 0 {
				continue
			}
			name := fmt.Sprintf("%s%s/%s.log", prefix, p.Name, c.Name)
			if previous {
				name = fmt.Sprintf("%s%s/%s.previous.log", prefix, p.Name, c.Name)
			}
			data, err := g.logs(ctx, p.Namespace, p.Name, c.Name, previous, g.tail)
			if err != nil {
				a.leftOut("%s: %v", name, err)
				continue
			}
			if err := a.file(name, data); err != nil {
				return err
			}
		}
	}
	return nil
}

// namespaced writes the operator's DaemonSets and Deployments, and the
// ConfigMaps that are the operator's or the chart's; of the others only
// the names, in the manifest.
func (g *gatherer) namespaced(ctx context.Context, a *archive) error {
	in := client.InNamespace(g.namespace)
	for _, k := range []struct {
		file string
		list client.ObjectList
	}{{"daemonsets.yaml", &appsv1.DaemonSetList{}}, {"deployments.yaml", &appsv1.DeploymentList{}}} {
		if g.listed(ctx, a, k.file, k.list, in) {
			if err := a.yaml("namespace/"+k.file, trimmed(k.list)); err != nil {
				return err
			}
		}
	}
	cms := &corev1.ConfigMapList{}
	if !g.listed(ctx, a, "configmaps", cms, in) {
		return nil
	}
	ours := &corev1.ConfigMapList{}
	var others []string
	for _, cm := range cms.Items {
		if cm.Labels[render.LabelManagedBy] == render.ManagedBy || cm.Labels[render.LabelPartOf] == "gpu-operator" {
			ours.Items = append(ours.Items, cm)
		} else {
			others = append(others, cm.Name)
		}
	}
	if len(others) > 0 {
		a.leftOut("ConfigMaps in %s that are neither the operator's nor the chart's (names only): %s", g.namespace, strings.Join(others, ", "))
	}
	return a.yaml("namespace/configmaps.yaml", trimmed(ours))
}

// events writes the namespace's events and the GPU nodes' own.
func (g *gatherer) events(ctx context.Context, a *archive) error {
	evs := &corev1.EventList{}
	if g.listed(ctx, a, "events in "+g.namespace, evs, client.InNamespace(g.namespace)) {
		if err := a.yaml("events/namespace.yaml", trimmed(evs)); err != nil {
			return err
		}
	}
	nodeEvents := &corev1.EventList{}
	if !g.listed(ctx, a, "node events", nodeEvents,
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.kind", "Node")}) {
		return nil
	}
	return a.yaml("events/nodes.yaml", trimmed(nodeEvents))
}

// resourceSlices writes NVIDIA's drivers' ResourceSlices.
func (g *gatherer) resourceSlices(ctx context.Context, a *archive) error {
	if !g.slicesServed {
		a.leftOut("ResourceSlices: resource.k8s.io/v1 not served by this cluster")
		return nil
	}
	list := &resourcev1.ResourceSliceList{}
	if !g.listed(ctx, a, "resourceslices", list) {
		return nil
	}
	list.Items = slices.DeleteFunc(list.Items, func(s resourcev1.ResourceSlice) bool {
		return !slices.Contains(nvidiaDrivers, s.Spec.Driver)
	})
	return a.yaml("resourceslices.yaml", trimmed(list))
}

// nodeFact is what must-gather keeps of a node: no images, no volumes.
type nodeFact struct {
	Name          string                 `json:"name"`
	Labels        map[string]string      `json:"labels,omitempty"`
	Annotations   map[string]string      `json:"annotations,omitempty"`
	Taints        []corev1.Taint         `json:"taints,omitempty"`
	Unschedulable bool                   `json:"unschedulable,omitempty"`
	Conditions    []corev1.NodeCondition `json:"conditions,omitempty"`
	Capacity      corev1.ResourceList    `json:"capacity,omitempty"`
	Allocatable   corev1.ResourceList    `json:"allocatable,omitempty"`
	NodeInfo      corev1.NodeSystemInfo  `json:"nodeInfo"`
}

func nodeFacts(nodes []corev1.Node) []nodeFact {
	out := make([]nodeFact, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, nodeFact{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations, Taints: n.Spec.Taints,
			Unschedulable: n.Spec.Unschedulable, Conditions: n.Status.Conditions, Capacity: n.Status.Capacity,
			Allocatable: n.Status.Allocatable, NodeInfo: n.Status.NodeInfo})
	}
	slices.SortFunc(out, func(a, b nodeFact) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// podTable is one line per pod: at thousands of nodes the namespace's
// pods in full would dwarf the rest.
func podTable(pods []corev1.Pod) []byte {
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Spec.NodeName, b.Spec.NodeName), cmp.Compare(a.Name, b.Name))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%-60s %-40s %-10s %-6s %s\n", "POD", "NODE", "PHASE", "READY", "RESTARTS")
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				ready++
			}
			restarts += s.RestartCount
		}
		fmt.Fprintf(&b, "%-60s %-40s %-10s %d/%-4d %d\n", p.Name, cmp.Or(p.Spec.NodeName, "-"), p.Status.Phase,
			ready, len(p.Spec.Containers), restarts)
	}
	return []byte(b.String())
}

// trimmed drops the managed fields of obj, or of each item of a list:
// noise to a reader, and most of an object's bytes.
func trimmed(obj any) any {
	if list, ok := obj.(client.ObjectList); ok {
		items, err := meta.ExtractList(list)
		if err == nil {
			for _, it := range items {
				if o, ok := it.(client.Object); ok {
					o.SetManagedFields(nil)
				}
			}
		}
		return obj
	}
	if o, ok := obj.(client.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj
}
