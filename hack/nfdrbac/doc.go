// Command nfdrbac writes config/rbac/nfd_cluster_roles.yaml: the
// ClusterRoles of NFD's components (nfd.ClusterRules) bound to their
// ServiceAccounts in the gpu-operator namespace. The installs ship them, so
// that the operator needs no write access to cluster-wide RBAC; make
// manifests runs it and copies the result into the chart.
package main
