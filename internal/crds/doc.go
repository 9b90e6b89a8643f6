// Package crds embeds the CRDs the operator needs (ClusterPolicy and NFD's),
// copied here by `make manifests`, so that `gpu-operator setup` can apply
// them where helm does not: helm never upgrades a chart's crds/.
package crds
