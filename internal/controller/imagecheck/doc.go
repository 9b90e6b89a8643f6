// Package imagecheck keeps one pod per precompiled driver image that a GPU
// node boots the kernel of: the pod pulls the image on such a node and
// exits, and its outcome tells the pools whether the image exists before
// any driver is replaced by it.
package imagecheck
