package nfd

import (
	"slices"
	"strings"
)

// FeatureLabelsAnnotation is where nfd-master keeps the names of the
// labels it set on a node, the default namespace's without their prefix
// (node-feature-discovery v0.19.0 api/nfd/v1alpha1/annotations_labels.go:51,
// pkg/nfd-master/nfd-master.go:1159-1168 updateNodeObject): it removes a
// label only if the annotation names it, and so does anyone cleaning up
// after it.
const FeatureLabelsAnnotation = "nfd.node.kubernetes.io/feature-labels"

// featureLabelNamespace is the namespace FeatureLabelsAnnotation leaves out.
const featureLabelNamespace = "feature.node.kubernetes.io"

// PublishedLabels returns the labels nfd-master says it set on a node, from
// its annotations.
func PublishedLabels(annotations map[string]string) []string {
	list := annotations[FeatureLabelsAnnotation]
	if list == "" {
		return nil
	}
	names := strings.Split(list, ",")
	for i, n := range names {
		if !strings.Contains(n, "/") {
			names[i] = featureLabelNamespace + "/" + n
		}
	}
	return names
}

// Annotate returns the FeatureLabelsAnnotation value for a set of labels,
// as nfd-master writes it: sorted, the default namespace's without their
// prefix; empty for none.
func Annotate(labels []string) string {
	names := make([]string, 0, len(labels))
	for _, l := range labels {
		names = append(names, strings.TrimPrefix(l, featureLabelNamespace+"/"))
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
