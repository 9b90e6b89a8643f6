package main

import (
	"fmt"
	"maps"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

const description = `gpu-operator turns nodes with NVIDIA GPUs into schedulable GPU capacity.
One ClusterPolicy describes the node stack (node feature discovery, driver,
container toolkit, device plugin, dcgm-exporter, GPU feature discovery); the
operator rolls it out on every GPU node in order, each state starting on a
node only after the states before it are ready there, as node labels
(nvidia.com/gpu.state.*) show.`

// draGroup is the API group of the DRA driver's CRDs (api/computedomain).
const draGroup = "resource.nvidia.com"

// ownDescriptions are the CSV's descriptions of the operator's CRDs.
var ownDescriptions = map[string]string{
	"ClusterPolicy": "ClusterPolicy describes the GPU node stack the operator keeps on every GPU node.",
	"NVIDIADriver":  "NVIDIADriver is a driver pool: the driver its GPU nodes run, and how they upgrade.",
	"GPUCluster":    "GPUCluster, NVIDIA's, puts every driver pool in allocation mode DRA while it exists.",
}

// draDescriptions are the CSV's descriptions of the DRA driver's CRDs.
var draDescriptions = map[string]string{
	"ComputeDomain":       "ComputeDomain is a group of nodes joined by Multi-Node NVLink that NVIDIA's DRA driver runs one multi-node workload on.",
	"ComputeDomainClique": "ComputeDomainClique lists the IMEX daemons of one NVLink clique of a ComputeDomain, as NVIDIA's DRA driver records them.",
}

// owned says whether the CSV owns and ships a CRD: the operator's and the
// DRA driver's are, NFD's are not.
func owned(crd apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Spec.Group == "nvidia.com" || crd.Spec.Group == draGroup
}

// clusterServiceVersion builds the CSV from the generated sources.
func clusterServiceVersion(root, version string, crds []crdFile) (map[string]any, error) {
	cluster, namespaced, err := rbac(root)
	if err != nil {
		return nil, err
	}
	spec, err := deployment(root, version)
	if err != nil {
		return nil, err
	}
	examples, err := almExamples(root)
	if err != nil {
		return nil, err
	}
	// The CSV owns the operator's CRDs and the DRA driver's ComputeDomain
	// CRDs, which it ships (as NVIDIA's bundle does). NFD's CRDs are
	// required, not owned: OLM resolves them from the NFD Operator, whose
	// CSV owns them, and two CSVs cannot own one CRD.
	var ownedCRDs, required []map[string]any
	for _, f := range crds {
		c := f.crd
		entry := map[string]any{
			"name": c.Name, "version": c.Spec.Versions[0].Name, "kind": c.Spec.Names.Kind, "displayName": c.Spec.Names.Kind,
		}
		switch {
		case c.Spec.Group == draGroup:
			entry["description"] = draDescriptions[c.Spec.Names.Kind]
			ownedCRDs = append(ownedCRDs, entry)
		case owned(c):
			entry["description"] = ownDescriptions[c.Spec.Names.Kind]
			ownedCRDs = append(ownedCRDs, entry)
		default:
			entry["description"] = fmt.Sprintf("%s of Node Feature Discovery, which the NFD Operator provides.", c.Spec.Names.Kind)
			required = append(required, entry)
		}
	}
	related, err := relatedImages(version)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata": map[string]any{
			"name": fmt.Sprintf("%s.v%s", packageName, version),
			"annotations": map[string]string{
				"alm-examples":   examples,
				"capabilities":   "Seamless Upgrades",
				"categories":     "AI/Machine Learning",
				"containerImage": fmt.Sprintf("%s:v%s", image, version),
				"description":    "Deploys and keeps the NVIDIA GPU node stack on every GPU node, in order.",
				"operatorframework.io/suggested-namespace": "gpu-operator",
				"repository": "https://github.com/gpu-operator/gpu-operator",
			},
		},
		"spec": map[string]any{
			"displayName":    "GPU Operator",
			"description":    description,
			"version":        version,
			"minKubeVersion": minKubeVersion,
			"maturity":       "alpha",
			"provider":       map[string]string{"name": "gpu-operator"},
			"keywords":       []string{"gpu", "nvidia", "driver", "device-plugin"},
			"links":          []map[string]string{{"name": "Source", "url": "https://github.com/gpu-operator/gpu-operator"}},
			"installModes": []map[string]any{
				{"type": "OwnNamespace", "supported": true},
				{"type": "SingleNamespace", "supported": false},
				{"type": "MultiNamespace", "supported": false},
				{"type": "AllNamespaces", "supported": false},
			},
			"customresourcedefinitions": map[string]any{"owned": ownedCRDs, "required": required},
			"relatedImages":             related,
			"install": map[string]any{
				"strategy": "deployment",
				"spec": map[string]any{
					"deployments":        []map[string]any{{"name": packageName, "spec": spec}},
					"permissions":        []map[string]any{{"serviceAccountName": packageName, "rules": namespaced}},
					"clusterPermissions": clusterPermissions(cluster),
				},
			},
		},
	}, nil
}

// clusterPermissions are the operator's cluster-wide rules and those of
// the operands (NFD's components, mig-manager), which OLM grants to their
// ServiceAccounts as the chart does, since the operator does not hold them
// to grant.
func clusterPermissions(operator any) []map[string]any {
	out := []map[string]any{{"serviceAccountName": packageName, "rules": operator}}
	rules := registry.ClusterRules()
	for _, c := range slices.Sorted(maps.Keys(rules)) {
		out = append(out, map[string]any{"serviceAccountName": c, "rules": rules[c]})
	}
	return out
}
