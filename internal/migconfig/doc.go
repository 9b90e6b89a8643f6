// Package migconfig reads mig-parted's configuration file, the config.yaml
// of migManager.config's ConfigMap, as mig-manager v0.15 reads it: the
// names of its configurations, and the MIG devices each gives a node.
package migconfig
