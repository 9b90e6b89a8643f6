// Package explain turns what the operator knows of a node, and of the
// fleet, into the answers kubectl gpu prints: the chain of states on a
// node with why each is not ready (the node controller's own judgement,
// made again read-only), the operation holding it, what it waits for, and
// what a person can do. It reads; it writes nothing.
package explain
