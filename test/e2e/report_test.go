//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// failuresFile gets every failed spec's name, place and message once the
// suite ends: the verbose log interleaves them with everything else, and
// CI prints this file last (.ci/run), where a truncated log still shows it.
var failuresFile = filepath.Join(root, "_output", "e2e-failures.txt")

// maxMessage keeps a failure's message (a spec's whole watch log, at
// times) to what a reader takes in.
const maxMessage = 6000

var _ = ReportAfterSuite("failures digest", func(r Report) {
	var b strings.Builder
	for _, s := range r.SpecReports {
		if !s.State.Is(types.SpecStateFailureStates) {
			continue
		}
		msg := s.Failure.Message
		if len(msg) > maxMessage {
			msg = msg[:maxMessage/2] + "\n[...]\n" + msg[len(msg)-maxMessage/2:]
		}
		fmt.Fprintf(&b, "FAILED %s [%s]\n  at %s\n%s\n\n", s.FullText(), s.Failure.FailureNodeType, s.Failure.Location, msg)
	}
	if b.Len() == 0 {
		_ = os.Remove(failuresFile)
		return
	}
	if err := os.WriteFile(failuresFile, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(GinkgoWriter, "writing the failures digest:", err)
	}
})
