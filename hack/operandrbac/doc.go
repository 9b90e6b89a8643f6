// Command operandrbac writes config/rbac/operand_cluster_roles.yaml: the
// ClusterRoles of the operands that act on cluster-wide objects (NFD's
// components, mig-manager, the DRA driver's: registry.ClusterRules). The
// installs ship them, since the operator does not hold their rules to
// grant; the operator binds each to its operand's ServiceAccount only while
// the operand runs (bind on these roles alone). make manifests runs it and
// copies the result into the chart.
package main
