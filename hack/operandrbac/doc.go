// Command operandrbac writes config/rbac/operand_cluster_roles.yaml: the
// ClusterRoles of the operands that act on cluster-wide objects (NFD's
// components, mig-manager: registry.ClusterRules) bound to their
// ServiceAccounts in the gpu-operator namespace. The installs ship them, so
// that the operator needs no write access to cluster-wide RBAC; make
// manifests runs it and copies the result into the chart.
package main
