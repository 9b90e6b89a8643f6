// Package operator wires the controllers, the state graph, the applier and
// the metrics to a manager. The binary and the controller tests share it.
package operator
