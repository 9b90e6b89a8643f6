package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// AnnotationMetadataHash is the hash of an OnDelete DaemonSet's pod
// template's labels and of its annotations outside the operator's prefix,
// on the template and so on every pod made from it. A pod of an OnDelete
// DaemonSet (the driver's, or any under daemonsets.updateStrategy OnDelete)
// keeps the metadata it was made with until it is replaced (a driver's,
// by an upgrade alone): the operator puts the template's labels and annotations on
// such a pod whose hash differs, without replacing it (RunningPodMetadata).
// Metadata never makes a pod outdated: specHash leaves it out.
const AnnotationMetadataHash = gpuv1.OperatorAnnotationPrefix + "metadata-hash"

// metadataHash hashes what RunningPodMetadata puts on a running pod. JSON
// (map keys sorted) keeps an annotation's value, which may hold any
// character, from running into the next key.
func metadataHash(labels, annotations map[string]string) string {
	users := maps.Clone(annotations)
	maps.DeleteFunc(users, func(k, _ string) bool { return strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) })
	data, err := json.Marshal([]map[string]string{labels, users})
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// RunningPodMetadata is what a running pod of the template must carry for
// its metadata to be the template's: every label, the annotations outside
// the operator's prefix, and the template's AnnotationMetadataHash. The
// operator's other annotations (the spec's hash, the digests of the files
// a pod read) say what the pod runs, and stay as the pod was made.
// Labels or annotations the template dropped stay on the pod until it is
// replaced: a running pod's metadata is only ever added to.
func RunningPodMetadata(tpl *corev1.PodTemplateSpec) (labels, annotations map[string]string) {
	annotations = map[string]string{AnnotationMetadataHash: tpl.Annotations[AnnotationMetadataHash]}
	for k, v := range tpl.Annotations {
		if !strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) {
			annotations[k] = v
		}
	}
	// Never nil: a merge patch of "labels": null would remove them all.
	labels = maps.Clone(tpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return labels, annotations
}
