// Package pluginconfig reads NVIDIA device plugin configuration files, the
// entries of devicePlugin.config's ConfigMap, as k8s-device-plugin v0.20.0
// reads them (api/config/v1: config.go, sharing.go, replicas.go), and says
// which of them this operator can run.
package pluginconfig
