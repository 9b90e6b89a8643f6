package fakenode

import (
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

// NFDPublishes reports whether NFD publishes features for the node: the
// cluster's own NFD, or the operator's nfd-worker running there.
func NFDPublishes(n *corev1.Node, pods []*corev1.Pod) bool {
	if ProfileOf(n).ExternalNFD {
		return true
	}
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool {
		return p.DeletionTimestamp == nil && p.Labels[render.LabelState] == string(state.NodeFeatureDiscovery) && PodReady(p)
	})
}

// labelGFD publishes GFD's labels as NFD does from GFD's feature file,
// which GFD writes while it runs and removes when it stops (k8s-device-plugin
// v0.20.0 cmd/gpu-feature-discovery/main.go: run, with
// GFD_USE_NODE_FEATURE_API=false, as the operator sets it; v0.20.0's
// default publishes a NodeFeature instead): Apply calls it only while NFD
// runs for the node, so that labels NFD published stay once NFD is gone, as
// on a real node. Like nfd-master, it names the labels it set in
// nfd.FeatureLabelsAnnotation, and removes only those. Sharing labels
// follow GFD's own configuration (internal/lm/resource.go): the replicas,
// the strategy, and -SHARED after the product unless renamed.
func labelGFD(n *corev1.Node, p Profile, gfd *corev1.Pod, s pluginconfig.Sharing) bool {
	want := map[string]string{}
	if gfd != nil && p.GPUs > 0 {
		product, count := "NVIDIA-H200", p.GPUs
		strategy := migStrategyOf(gfd)
		if suffix, devices, ok := migProduct(layoutOf(n, p.GPUs), p.GPUs, strategy); ok {
			product, count = product+suffix, devices
		}
		if s.Replicas > 1 && !s.Renamed {
			product += "-SHARED"
		}
		want = map[string]string{
			"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": strconv.Itoa(count),
			"nvidia.com/gpu.memory": "143771", "nvidia.com/gpu.family": "hopper",
			"nvidia.com/gpu.replicas": strconv.Itoa(s.Replicas), "nvidia.com/gpu.sharing-strategy": s.Strategy,
			"nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": strategy,
			// GFD's sharing labeler (k8s-device-plugin v0.20.0,
			// internal/lm/nvml.go): capable under an MPS configuration.
			"nvidia.com/mps.capable": strconv.FormatBool(s.Strategy == "mps"),
		}
	}
	published := nfd.PublishedLabels(n.Annotations)
	have := map[string]string{}
	for _, l := range published {
		if v, ok := n.Labels[l]; ok {
			have[l] = v
		}
	}
	annotation := nfd.Annotate(slices.Collect(maps.Keys(want)))
	if maps.Equal(have, want) && n.Annotations[nfd.FeatureLabelsAnnotation] == annotation {
		return false
	}
	for _, l := range published {
		delete(n.Labels, l)
	}
	if len(want) > 0 && n.Labels == nil {
		n.Labels = map[string]string{}
	}
	maps.Copy(n.Labels, want)
	switch {
	case annotation != "":
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[nfd.FeatureLabelsAnnotation] = annotation
	default:
		delete(n.Annotations, nfd.FeatureLabelsAnnotation)
	}
	return true
}
