// Package dcgm renders the dcgm state: NVIDIA's standalone DCGM host
// engine (nv-hostengine) on each GPU node, and the node-local Service
// dcgm-exporter reads it through.
package dcgm
