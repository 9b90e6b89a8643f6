// Package node is the per-node controller: for each node it observes the
// operand pods there, asks internal/gating for the labels the node should
// carry, and writes them in one server-side apply, only when they differ.
package node
