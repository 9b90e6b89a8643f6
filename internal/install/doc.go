// Package install holds what the operator binary does around an install
// besides running: `setup` applies the CRDs and labels the namespace (helm
// never upgrades a chart's crds/), and `cleanup` deletes the ClusterPolicies
// before an uninstall so that the running operator removes its node labels.
package install
