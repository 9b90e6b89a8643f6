package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
)

// pluginConfigs keeps devicePlugin.config's files and the validated
// copies as last judged, so that each node's decision does not parse every
// file again.
type pluginConfigs struct {
	mu     sync.Mutex
	from   [2]string // the ConfigMaps' UIDs and versions judged
	mixed  bool      // under mig.strategy mixed, which refuses MPS
	judged *judgedConfigs
}

// judgedConfigs are the files as the gating input takes them.
type judgedConfigs struct {
	problems          map[string]string
	mps, kept, copied map[string]bool
}

// judge returns the files of the user's ConfigMap and of the operator's
// validated copy (either nil when it does not exist), judged under the
// policy's MIG strategy as the ClusterPolicy controller judges them.
func (p *pluginConfigs) judge(user, validated *corev1.ConfigMap, mixed bool) *judgedConfigs {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := [2]string{versionOf(user), versionOf(validated)}
	if from == p.from && mixed == p.mixed && p.judged != nil {
		return p.judged
	}
	var data, kept map[string]string
	var binary []string
	if user != nil {
		data, binary = user.Data, slices.Collect(maps.Keys(user.BinaryData))
	}
	if validated != nil {
		kept = validated.Data
	}
	files := pluginconfig.Resolve(data, binary, kept, pluginconfig.MPSUnderMixed(mixed))
	copied := make(map[string]bool, len(kept))
	for name := range kept {
		copied[name] = true
	}
	p.from, p.mixed, p.judged = from, mixed, &judgedConfigs{problems: files.Problems, mps: files.MPS(), kept: files.KeptNames(), copied: copied}
	return p.judged
}

func versionOf(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	return string(cm.UID) + "/" + cm.ResourceVersion
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// gpuPodsOn counts the pods on a node that hold GPUs the device plugin
// allocated (an nvidia.com/ resource), listed live: only a node whose
// configuration is to change asks.
func (r *Reconciler) gpuPodsOn(ctx context.Context, node string) (int, error) {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && gating.RequestsNVIDIAResource(p) {
			n++
		}
	}
	return n, nil
}
