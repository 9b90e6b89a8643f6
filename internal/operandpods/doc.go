// Package operandpods keeps what the operator knows of its operand pods: a
// compact summary of each, indexed by node, fed by its own informer.
//
// The manager's cache holds whole objects of the scheme's types, and a
// trimmed corev1.Pod still costs about 2.7 KB (PodSpec and PodStatus are
// large structs however little they hold). At a few operand pods per GPU
// node that was half the operator's live heap; the summary is under a
// third of it. The controllers read summaries from this index and never
// Pods from the cache, which must not start a Pod informer of its own.
package operandpods
