// Package deviceplugin renders the device-plugin state: the NVIDIA device
// plugin DaemonSet, which registers nvidia.com/gpu with the kubelet.
package deviceplugin
