package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The host check reads a run of the sample as the operator reads the
// proof's pod: a pass is ready, Fabric Manager's 802 is named, and only
// the log's tail the kubelet keeps is read.
func TestVerdictReadsTheSampleAsTheOperatorDoes(t *testing.T) {
	g := NewWithT(t)
	line, ok := verdict(0, "[Vector addition of 50000 elements]\nTest PASSED\nDone\n")
	g.Expect(ok).To(BeTrue())
	g.Expect(line).To(HavePrefix("passed"))

	line, ok = verdict(1, "[Vector addition of 50000 elements]\nFailed to allocate device vector A (error code system not yet initialized)!\n")
	g.Expect(ok).To(BeFalse())
	g.Expect(line).To(And(HavePrefix("failed"), ContainSubstring("CUDA error 802"), ContainSubstring("Fabric Manager")))

	long := strings.Repeat("noise\n", 500) + "Failed to allocate device vector A (error code no CUDA-capable device is detected)!\n"
	g.Expect(len(logTail(long))).To(BeNumerically("<=", 2048))
	g.Expect(strings.Count(logTail(long), "\n")).To(BeNumerically("<=", 80))
	line, _ = verdict(1, long)
	g.Expect(line).To(ContainSubstring("CUDA error 100"))
}
