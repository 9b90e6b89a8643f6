// Package state holds the ordered states of the GPU node stack as data: each
// state's name, scope, prerequisites and operand, the graph they form, the
// node affinity that gates a state's pods on its prerequisites, and the
// judgement of one state's pod on one node.
package state
