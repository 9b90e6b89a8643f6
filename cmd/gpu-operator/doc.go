// Command gpu-operator runs the GPU operator: it reconciles the ClusterPolicy
// into the ordered GPU node stack. main.go only wires flags, scheme and
// manager together; the work happens in internal/.
package main
