package pluginconfig

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Judgement is devicePlugin.config's files judged against the validated
// copies: Files, and what the controllers read of them. Shared: read it,
// never change it.
type Judgement struct {
	Files
	// MPSNames share GPUs with MPS; KeptNames run from their last good
	// copy; Copied are in the validated ConfigMap.
	MPSNames, KeptNames, Copied map[string]bool
}

// Judge keeps the last judgement of the user's ConfigMap and the
// validated one, so that a controller judges the files again only when
// one of them, or the policy's rule, changed: not at every reconcile, nor
// for every node.
type Judge struct {
	mu    sync.Mutex
	from  [2]string // the ConfigMaps' UIDs and versions judged
	mixed bool
	last  *Judgement
}

// Judge judges the files of the user's ConfigMap and of the validated one
// (either nil when it does not exist) under mig.strategy mixed or not.
func (j *Judge) Judge(user, validated *corev1.ConfigMap, mixed bool) *Judgement {
	j.mu.Lock()
	defer j.mu.Unlock()
	from := [2]string{versionOf(user), versionOf(validated)}
	if j.last != nil && from == j.from && mixed == j.mixed {
		return j.last
	}
	var data, kept map[string]string
	var binary []string
	if user != nil {
		data, binary = user.Data, slices.Sorted(maps.Keys(user.BinaryData))
	}
	if validated != nil {
		kept = validated.Data
	}
	files := Resolve(data, binary, kept, MPSUnderMixed(mixed))
	copied := make(map[string]bool, len(kept))
	for name := range kept {
		copied[name] = true
	}
	j.from, j.mixed = from, mixed
	j.last = &Judgement{Files: files, MPSNames: files.MPS(), KeptNames: files.KeptNames(), Copied: copied}
	return j.last
}

func versionOf(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	return string(cm.UID) + "/" + cm.ResourceVersion
}
