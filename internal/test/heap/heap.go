package heap

import "runtime"

// RetainedPer returns the heap bytes that stay, per object, once keep's
// results for 0..n-1 are all that is left of the work that made them.
func RetainedPer(n int, keep func(i int) any) uint64 {
	out := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range out {
		out[i] = keep(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(out)
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}
