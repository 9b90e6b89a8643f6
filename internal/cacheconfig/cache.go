package cacheconfig

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

// Options returns the cache options: by default only objects labelled as the
// operator's, in its namespace; nodes trimmed and policies and
// NVIDIADrivers and the GPUCluster (users' objects, unlabelled), all of them;
// every ConfigMap of its namespace, since the policy names users' ones
// (devicePlugin.config, whose configurations the node controller checks
// names against). Operand pods are not here but in the operandpods index.
// Nodes are trimmed by nodes, which the nodes a controller writes and keeps
// until the cache has them can share.
func Options(namespace string, nodes *NodeTrimmer) cache.Options {
	return cache.Options{
		DefaultNamespaces:    map[string]cache.Config{namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy}),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:         {Label: labels.Everything(), Transform: nodes.Trim},
			&gpuv1.ClusterPolicy{}: {Label: labels.Everything()},
			// A user's, unlabelled: the default selector would hide every
			// one of them.
			&gpuv1alpha1.NVIDIADriver{}: {Label: labels.Everything()},
			&gpuv1alpha1.GPUCluster{}:   {Label: labels.Everything()},
			&corev1.ConfigMap{}:         {Label: labels.Everything()},
		},
	}
}

// NodeTrimmer trims nodes for the cache. It shares what nodes have in
// common: their GPU resource lists, which across a fleet take a handful of
// values (nvidia.com/gpu: 8), are one map per value rather than two per
// node; and what a node's versions have in common: a version with its
// last one's labels has its map. Cached objects are read-only, shared or
// not.
type NodeTrimmer struct {
	mu        sync.Mutex
	resources map[string]corev1.ResourceList // by resourceKey
	// strings holds one copy of each label key and value.
	strings map[string]string
	// labels are the nodes' last label maps: most of a node's versions
	// change anything but its labels (its status, annotations), and
	// each decoded version holds its own map of a hundred labels.
	labels lastLabels
}

// maxSharedResourceLists bounds the resource lists a NodeTrimmer keeps;
// past it a list is not shared. A fleet has a few, MIG layouts included.
const maxSharedResourceLists = 1024

// maxInternedStrings bounds the label strings a NodeTrimmer keeps: a few
// hundred keys and common values, and one hostname per node, for fleets of
// tens of thousands of nodes. Past it a string is not shared. Strings of
// nodes gone stay until the operator restarts, within the bound.
const maxInternedStrings = 1 << 17

// NewNodeTrimmer returns a NodeTrimmer.
func NewNodeTrimmer() *NodeTrimmer {
	return &NodeTrimmer{resources: map[string]corev1.ResourceList{}, strings: map[string]string{}}
}

// Trim keeps what the operator reads of a node: name, labels, its own
// annotations (the node controller's, the upgrade's, the repair's and the
// MIG reconfiguration's, a person's approval included), NFD's list of the
// labels it set, whether it is
// cordoned, the boot ID, the runtime and its
// handlers, the GPU resources and the Ready condition. Images, managed
// fields and other controllers' annotations can be most of a node's size.
// Label keys and values are shared: a fleet's nodes carry the same few
// hundred (NFD's and GFD's), and each decoded node holds its own copies.
func (t *NodeTrimmer) Trim(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return t.Node(n), nil
}

// Node returns what the cache keeps of n (Trim), n itself untouched.
func (t *NodeTrimmer) Node(n *corev1.Node) *corev1.Node {
	trimmed := &corev1.Node{}
	trimmed.TypeMeta = n.TypeMeta
	trimmed.Name, trimmed.UID, trimmed.ResourceVersion = n.Name, n.UID, n.ResourceVersion
	trimmed.CreationTimestamp, trimmed.DeletionTimestamp = n.CreationTimestamp, n.DeletionTimestamp
	trimmed.Labels = t.intern(n.Name, n.Labels)
	for k, v := range n.Annotations {
		switch {
		case strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) || strings.HasPrefix(k, gpuv1.UpgradeAnnotationPrefix) ||
			strings.HasPrefix(k, gpuv1.RemediationAnnotationPrefix) || strings.HasPrefix(k, gpuv1.MIGReconfigureAnnotationPrefix) ||
			strings.HasPrefix(k, gpuv1.ModeSwitchAnnotationPrefix) || strings.HasPrefix(k, gpuv1.MaintenanceAnnotationPrefix):
		case k == nfd.FeatureLabelsAnnotation:
			// Which labels NFD set: the ClusterPolicy's cleanup removes
			// GFD's. Nodes share its value.
			v = t.internOne(v)
		default:
			continue
		}
		if trimmed.Annotations == nil {
			trimmed.Annotations = map[string]string{}
		}
		trimmed.Annotations[k] = v
	}
	trimmed.Spec.Unschedulable = n.Spec.Unschedulable
	trimmed.Spec.Taints = n.Spec.Taints
	trimmed.Status.NodeInfo.BootID = n.Status.NodeInfo.BootID
	trimmed.Status.NodeInfo.ContainerRuntimeVersion = n.Status.NodeInfo.ContainerRuntimeVersion
	for _, h := range n.Status.RuntimeHandlers {
		// The names only: the toolkit's proof is the NVIDIA handler there.
		trimmed.Status.RuntimeHandlers = append(trimmed.Status.RuntimeHandlers, corev1.NodeRuntimeHandler{Name: h.Name})
	}
	trimmed.Status.Capacity = t.shared(gpuResources(n.Status.Capacity))
	trimmed.Status.Allocatable = t.shared(gpuResources(n.Status.Allocatable))
	trimmed.Status.Conditions = readyCondition(n.Status.Conditions)
	return trimmed
}

// intern returns the node's labels with shared copies of their strings,
// in the map its last version had when they are the same. (The unique
// package's handles would not do: its table forgets a string once no
// handle to it is left, and the copies would come back.)
func (t *NodeTrimmer) intern(node string, labels map[string]string) map[string]string {
	if labels == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.labels.of(node); ok && maps.Equal(last, labels) {
		t.labels.keep(node, last)
		return last
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[t.internLocked(k)] = t.internLocked(v)
	}
	t.labels.keep(node, out)
	return out
}

// lastLabels are the label maps of the nodes' last versions trimmed, by
// node name, in two generations (keep says when one ends); a node seen in
// neither generation is forgotten. So a deleted node's map goes within two
// generations, and one whose versions come further apart than that only
// has its next version's map made anew.
type lastLabels struct {
	current, older map[string]map[string]string
	// seen counts the versions the current generation has seen.
	seen int
}

// minLabelGeneration is half the fewest versions a generation of
// lastLabels sees, so that a small cluster's generations do not end at
// every version.
const minLabelGeneration = 1024

func (l *lastLabels) of(node string) (map[string]string, bool) {
	if m, ok := l.current[node]; ok {
		return m, true
	}
	m, ok := l.older[node]
	return m, ok
}

func (l *lastLabels) keep(node string, m map[string]string) {
	if l.current == nil {
		l.current = map[string]map[string]string{}
	}
	l.current[node] = m
	l.seen++
	// A generation sees twice as many versions as the two hold nodes: a
	// fleet's nodes, each seen in turn, are all found again however large
	// it is, and the nodes of a fleet that shrank are forgotten.
	if l.seen >= 2*max(minLabelGeneration, len(l.current)+len(l.older)) {
		l.older, l.current, l.seen = l.current, map[string]map[string]string{}, 0
	}
}

func (t *NodeTrimmer) internOne(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.internLocked(s)
}

func (t *NodeTrimmer) internLocked(s string) string {
	if kept, ok := t.strings[s]; ok {
		return kept
	}
	if len(t.strings) < maxInternedStrings {
		t.strings[s] = s
	}
	return s
}

// gpuResources keeps the GPU resources of a list: all the operator reads
// of what a node advertises.
func gpuResources(l corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range l {
		if gating.IsGPUResource(name) {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// shared returns the list the trimmer keeps for l's value, l itself the
// first time.
func (t *NodeTrimmer) shared(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	key := resourceKey(l)
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.resources[key]; ok {
		return kept
	}
	if len(t.resources) < maxSharedResourceLists {
		t.resources[key] = l
	}
	return l
}

// resourceKey is a resource list's value as a string: its names in order,
// each with its quantity.
func resourceKey(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}

func readyCondition(conds []corev1.NodeCondition) []corev1.NodeCondition {
	for _, c := range conds {
		if c.Type == corev1.NodeReady {
			return []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return nil
}

// ClientOptions returns the manager client's options: Pods are read from
// the API server, never from the cache. The operand pods index summarises
// the operator's own; a cached read would start a second Pod informer
// holding whole objects.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Pod{}}}}
}
