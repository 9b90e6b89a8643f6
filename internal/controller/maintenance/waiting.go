package maintenance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// WaitingFieldOwner manages the annotation that says why an operation
// waits, apart from each operation's own marks.
const WaitingFieldOwner = "gpu-operator-maintenance"

// waitingEvent is the reason of the events on a node whose operation
// waits.
const waitingEvent = "GPUMaintenanceWaiting"

// tellWaiting writes why an operation that wants to start on the node
// waits (gpuv1.AnnotationMaintenanceWaiting), removing it when none
// does, and tells it in an event when it changes. The reasons name no
// count of the moment, so a node waiting for a budget is written once,
// not at every look. The node as written is read back until the cache
// has it (writes).
func (r *Reconciler) tellWaiting(ctx context.Context, n *corev1.Node, why string) error {
	if n.Annotations[gpuv1.AnnotationMaintenanceWaiting] == why {
		return nil
	}
	ac := corev1ac.Node(n.Name)
	if why != "" {
		ac.WithAnnotations(map[string]string{gpuv1.AnnotationMaintenanceWaiting: why})
	}
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(WaitingFieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing why node %s waits: %w", n.Name, err)
	}
	if why != "" {
		r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, waitingEvent, "Wait", "%s", why)
	}
	written, err := asNode(ac)
	if err != nil {
		return err
	}
	r.remember(n.ResourceVersion, written)
	return nil
}
