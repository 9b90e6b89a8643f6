// Package fakenode plays what a real GPU node does in reply to the
// operator's pods, for the simulated clusters.
package fakenode
