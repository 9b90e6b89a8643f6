// Package clusterpolicy is the ClusterPolicy controller: one flat reconcile
// that renders every state into objects, applies them under one field
// owner, prunes what is no longer wanted, and writes one status patch that
// summarises the GPU nodes. Per-node labels are the node controller's.
package clusterpolicy
