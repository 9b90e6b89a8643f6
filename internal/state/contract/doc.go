// Package contract holds the operand contract tests: for each operand, a
// table of what its image needs from its pod (mounts, propagation, env,
// privileges, RuntimeClass, probes, arguments) at the version the operator
// ships, each row naming the upstream file it was read from, checked
// against the rendered pods of every policy and every node variant
// (containerd or CRI-O, a driver container or a host driver). Golden files
// catch change; these catch mistakes.
package contract
