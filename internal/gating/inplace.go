package gating

import (
	"fmt"
	"strings"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// AnnotationDriverRestart records a driver pod restarting in place, as
// "<digest>@<RFC3339>": the configuration digest the loaded modules were
// installed with, and when the restart was first seen. It survives the
// gap between the old pod's end and its successor's start, and the
// operator's own restarts.
const AnnotationDriverRestart = gpuv1.OperatorAnnotationPrefix + "driver-restart"

// inPlaceRestart is a driver pod deleted (by a person, an eviction) and
// replaced by one of the configuration digest it ran, which its
// DaemonSet's template still has. The
// driver container then keeps the modules that are loaded
// (state.DriverConfigDigestEnv): nothing the states after the driver
// started against goes away, and they stay ready while its successor
// starts, for the restart's grace period (timers.DriverRestartGrace)
// rather than a short outage's. The modules stay only while something
// holds them: the device plugin's health check and DCGM hold NVML. Where
// nothing does, the old pod unloads them and its successor installs the
// same driver again, which nothing held a handle to.
type inPlaceRestart struct {
	digest string
	since  time.Time
}

func parseInPlaceRestart(s string) inPlaceRestart {
	digest, since, ok := strings.Cut(s, "@")
	t, err := time.Parse(time.RFC3339, since)
	if !ok || digest == "" || err != nil {
		return inPlaceRestart{}
	}
	return inPlaceRestart{digest: digest, since: t}
}

func (r inPlaceRestart) String() string {
	if r.digest == "" {
		return ""
	}
	return r.digest + "@" + r.since.UTC().Format(time.RFC3339)
}

// driverRestartInPlace returns the node's driver restart in place, if one
// is under way: a driver pod seen terminating with its template's digest
// (Input.DriverRestartDigest), or one recorded and not contradicted, as
// while no driver pod runs or the successor starts. A driver pod whose
// container fails in place starts none: it gets a short outage's grace. A digest other than
// the recorded one is no restart in place: the modules loaded were
// installed with the recorded one, and the successor installs its own. A
// repair's driver reload and an upgrade's driver replacement never get
// here: their nodes' states are the operation's (TestWhatIsNoDriverRestartInPlace),
// and they take everything after the driver off the node before the
// driver pod goes, so that nothing holds the modules and they reload.
func (d *decision) driverRestartInPlace() (inPlaceRestart, bool) {
	seen, before := d.in.DriverRestartDigest, d.restartBefore
	switch {
	case before.digest != "" && (seen == "" || seen == before.digest):
		return before, true
	case before.digest == "" && seen != "":
		return inPlaceRestart{digest: seen, since: d.now}, true
	}
	return inPlaceRestart{}, false
}

// driverKeptInPlace reports whether a restart in place is seen or
// recorded, whatever its digest: the loaded modules stay, so a driver
// still runs on the node.
func (d *decision) driverKeptInPlace() bool {
	return d.in.DriverRestartDigest != "" || d.restartBefore.digest != ""
}

// judgeDriverRestart decides the ready driver state while its pod is gone
// or not ready; handled is false when no restart in place is under way.
func (d *decision) judgeDriverRestart(cur gpuv1.StateValue) (value gpuv1.StateValue, handled bool) {
	r, ok := d.driverRestartInPlace()
	if !ok || cur != gpuv1.StateReady {
		return "", false
	}
	if left := d.in.DriverRestartGrace - d.now.Sub(r.since); left > 0 {
		d.restarting = r
		d.requeue(left)
		return gpuv1.StateReady, true
	}
	why := fmt.Sprintf("the driver pod restarting in place was not ready within %s", d.in.DriverRestartGrace)
	d.leave(state.Driver, cur, gpuv1.StatePending, why)
	return d.because(state.Driver, gpuv1.StatePending, why), true
}

// successorInPlace reports whether a ready driver pod other than the one
// last judged ready is the successor of a restart in place: it runs the
// digest the loaded modules were installed with.
func (d *decision) successorInPlace(pod *state.PodFacts) bool {
	r, ok := d.driverRestartInPlace()
	return ok && pod.ConfigDigest != "" && pod.ConfigDigest == r.digest
}
