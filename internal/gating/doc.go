// Package gating decides, for one node, the labels and annotations the
// operator wants on it: GPU discovery, deploy labels, and each state's
// pending/ready/failed/disabled value judged from the state's pod there,
// with grace periods, reboot and driver-replacement resets. It is pure: the
// node controller feeds it what it observed and applies the result.
package gating
