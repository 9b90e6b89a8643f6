package operator

import (
	"fmt"
	"os"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gpu-operator/gpu-operator/internal/eventtrail"
)

// reportingInstanceLimit is the most characters an Event's
// reportingInstance may have (ReportingInstanceLengthLimit, k8s.io/kubernetes
// pkg/apis/core/validation/events.go).
const reportingInstanceLimit = 128

// eventRecorder is the recorder of every controller's events: one Event
// per object, reason and type, whose message is its trail
// (internal/eventtrail), added to mgr to write them. client-go's recorder
// keeps each event it sent for 6 to 12 minutes and never forms a series
// of an upgrade's steps, whose notes differ: at 1000 nodes it held 7.5-9.2
// MB near the upgrade's peak (docs/scale.md).
func eventRecorder(mgr ctrl.Manager) (*eventtrail.Recorder, error) {
	client, err := corev1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("building the events client: %w", err)
	}
	host, _ := os.Hostname()
	instance := FieldOwner + "-" + host
	if len(instance) > reportingInstanceLimit {
		instance = instance[:reportingInstanceLimit]
	}
	rec := eventtrail.New(client, mgr.GetScheme(), mgr.GetLogger().WithName("events"),
		eventtrail.DefaultOptions(FieldOwner, instance))
	if err := mgr.Add(rec); err != nil {
		return nil, fmt.Errorf("adding the events writer: %w", err)
	}
	return rec, nil
}
