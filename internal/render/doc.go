// Package render holds the builders every operand shares: the labels and
// owner reference of operator objects, image references, env merging, and a
// gated DaemonSet with the policy's daemonsets settings applied. Everything
// here is pure and deterministic: maps are sorted before they become lists.
package render
