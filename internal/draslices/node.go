package draslices

import (
	"cmp"
	"fmt"
	"slices"
)

// Node is what a node's slices say.
type Node struct {
	// Slices counts the NVIDIA driver's slices on the node, of both its
	// drivers: a node that left allocation mode dra is clear once it is 0.
	Slices int
	// Pools are the GPU driver's pools on the node (one, named after the
	// node, from the driver at 95932046: cmd/gpu-kubelet-plugin/driver.go).
	Pools []Pool
	// GPUs counts the GPUs the newest generation of the pools names: whole
	// GPUs, GPUs bound for passthrough, and the GPUs MIG devices are cut
	// from (a GPU in MIG mode publishes its MIG devices, not itself).
	GPUs int
	// WholeGPUs counts the devices of type gpu (a GPU out of MIG mode, not
	// bound for passthrough), and MIGDevices the MIG devices by profile,
	// of the newest generation: what a MIG configuration is checked
	// against on a DRA node.
	WholeGPUs  int
	MIGDevices map[string]int
	// Tainted maps each GPU a device taint keeps workloads off (the GPU's
	// own, or one of its MIG devices') to the taints, as key=value.
	Tainted map[string][]string
	// Informing are taints that keep nothing off (effect None), such as
	// gpu.nvidia.com/unmonitored when the driver cannot watch for XIDs.
	Informing []string
}

// Pool is one of the GPU driver's pools on a node, at its newest
// generation: a pool is complete when every slice of that generation is
// published (spec.pool.resourceSliceCount).
type Pool struct {
	Name       string
	Generation int64
	Have, Want int64
}

// Complete reports whether every pool has all its slices: until then a
// count of GPUs is of part of the node.
func (n *Node) Complete() bool {
	if len(n.Pools) == 0 {
		return false
	}
	for _, p := range n.Pools {
		if p.Have != p.Want {
			return false
		}
	}
	return true
}

// Incomplete says which pool is short, for a condition message.
func (n *Node) Incomplete() string {
	for _, p := range n.Pools {
		if p.Have != p.Want {
			return fmt.Sprintf("pool %s generation %d: %d of %d slices", p.Name, p.Generation, p.Have, p.Want)
		}
	}
	return ""
}

// Summarize reads a node's slices. Slices of other drivers are skipped; of
// a pool only the newest generation counts, as for the scheduler (older
// ones are being replaced).
func Summarize(list []*Slice) *Node {
	n := &Node{}
	newest := map[string]int64{}
	for _, s := range list {
		if !s.Ours() {
			continue
		}
		n.Slices++
		if s.Driver == GPUDriver {
			newest[s.Pool] = max(newest[s.Pool], s.Generation)
		}
	}
	pools := map[string]*Pool{}
	gpus := map[string]bool{}
	for _, s := range list {
		if s.Driver != GPUDriver || s.Generation != newest[s.Pool] {
			continue
		}
		p := pools[s.Pool]
		if p == nil {
			p = &Pool{Name: s.Pool, Generation: s.Generation}
			pools[s.Pool] = p
		}
		p.Have++
		p.Want = max(p.Want, s.Count)
		for _, d := range s.Devices {
			gpu := d.gpu()
			gpus[gpu] = true
			n.count(d)
			for _, t := range d.Taints {
				if !t.Keeps() {
					n.Informing = append(n.Informing, d.Name+": "+t.String())
					continue
				}
				if n.Tainted == nil {
					n.Tainted = map[string][]string{}
				}
				if !slices.Contains(n.Tainted[gpu], t.String()) {
					n.Tainted[gpu] = append(n.Tainted[gpu], t.String())
				}
			}
		}
	}
	for _, p := range pools {
		n.Pools = append(n.Pools, *p)
	}
	slices.SortFunc(n.Pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(n.Informing)
	n.GPUs = len(gpus)
	return n
}

// count adds a device to the node's whole GPUs or MIG devices.
func (n *Node) count(d Device) {
	switch d.Type {
	case TypeGPU:
		n.WholeGPUs++
	case TypeMIG:
		if n.MIGDevices == nil {
			n.MIGDevices = map[string]int{}
		}
		n.MIGDevices[d.Profile]++
	}
}

// gpu names the GPU a device is, or is cut from: its UUID, or the device's
// name when the driver published none (a dynamic MIG placement).
func (d Device) gpu() string {
	if d.Type == TypeMIG {
		return cmp.Or(d.ParentUUID, d.Name)
	}
	return cmp.Or(d.UUID, d.Name)
}

// String is the taint as the driver's documentation writes it.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key
	}
	return t.Key + "=" + t.Value
}
