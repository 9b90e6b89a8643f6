// Package mps renders the mps-control-daemon state: NVIDIA's MPS control
// daemon, from the device plugin's image, on the nodes whose device plugin
// configuration shares GPUs with MPS, before their device plugin starts.
package mps
