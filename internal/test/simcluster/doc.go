// Package simcluster starts, drives and stops the simulated cluster of hack/sim and the operator process on it, for the e2e suite, the scale benchmark and the chaos test.
package simcluster
