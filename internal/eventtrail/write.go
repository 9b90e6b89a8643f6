package eventtrail

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Start writes the Events until ctx ends. The Recorder runs on every
// replica: only the leader's controllers record, and a step recorded
// before Start waits for it.
func (r *Recorder) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for r.next(ctx) {
	}
	return nil
}

// NeedLeaderElection is false: a replica that loses its lease writes the
// steps it recorded while it led.
func (r *Recorder) NeedLeaderElection() bool { return false }

// next writes one Event's pending steps, or lets go of an idle trail; it
// is false once the queue is shut down.
func (r *Recorder) next(ctx context.Context) bool {
	k, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(k)

	r.mu.Lock()
	e := r.entries[k]
	if e == nil {
		if last, ok := r.known[k]; ok {
			r.expire(k, last, r.opts.Remember, func() { delete(r.known, k) })
		}
		r.mu.Unlock()
		return true
	}
	if len(e.pending) == 0 && e.unwritten > 0 {
		// Only repeats of the newest step: written once Keep has passed
		// since the last write.
		if idle := r.opts.Now().Sub(e.lastWrite); idle < r.opts.Keep {
			r.queue.AddAfter(k, r.opts.Keep-idle)
			r.mu.Unlock()
			return true
		}
	} else if len(e.pending) == 0 {
		r.expire(k, e.lastWrite, r.opts.Keep, func() {
			delete(r.entries, k)
			if e.resourceVersion != "" {
				r.known[k] = e.lastWrite
				r.expire(k, e.lastWrite, r.opts.Remember, func() { delete(r.known, k) })
			}
		})
		r.mu.Unlock()
		return true
	}
	w := writing{entry: *e, key: k}
	e.pending, e.unwritten = nil, 0
	r.mu.Unlock()

	ev, err := r.write(ctx, &w)

	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.queue.Forget(k)
		e.written, e.resourceVersion, e.count = ev.Message, ev.ResourceVersion, ev.Count
		e.first, e.lastWrite, e.tries = ev.FirstTimestamp.Time, r.opts.Now(), 0
		if len(e.pending) == 0 {
			r.queue.AddAfter(k, r.opts.Keep)
		}
		return true
	}
	e.tries++
	if e.tries >= r.opts.Tries {
		r.log.Error(err, "event steps dropped", "event", e.namespace+"/"+e.name, "steps", w.unwritten)
		r.queue.Forget(k)
		e.tries = 0
		if len(e.pending) == 0 && e.resourceVersion == "" {
			delete(r.entries, k)
		}
		return true
	}
	r.log.V(1).Info("event not written, retrying", "event", e.namespace+"/"+e.name, "error", err.Error())
	e.pending = fitting(append(w.pending, e.pending...))
	e.unwritten += w.unwritten
	r.queue.AddRateLimited(k)
	return true
}

// expire calls drop once after has passed since last, or looks at k again
// when it will have; r.mu is held.
func (r *Recorder) expire(k key, last time.Time, after time.Duration, drop func()) {
	if idle := r.opts.Now().Sub(last); idle < after {
		r.queue.AddAfter(k, after-idle)
		return
	}
	drop()
}

// writing is an entry as it was when its steps were taken to be written.
type writing struct {
	entry
	key key
}

// write creates or patches the Event with w's pending steps. An Event
// this process did not write as it is (one from before a restart, or
// changed by someone else) is read, and its trail goes on from it; one
// deleted (by the API server's event TTL) starts afresh.
func (r *Recorder) write(ctx context.Context, w *writing) (*corev1.Event, error) {
	events := r.client.Events(w.namespace)
	ev := r.event(w, w.written, w.count, w.first)
	ev.ResourceVersion = w.resourceVersion
	var err error
	switch {
	case w.exists && w.resourceVersion == "":
		// Known to exist: read below, rather than refused a create.
	case w.resourceVersion == "":
		var created *corev1.Event
		if created, err = events.Create(ctx, ev, metav1.CreateOptions{}); err == nil || !apierrors.IsAlreadyExists(err) {
			return created, wrap(err, ev)
		}
	default:
		var patched *corev1.Event
		if patched, err = r.patch(ctx, ev); err == nil || !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return patched, wrap(err, ev)
		}
	}
	cur, err := events.Get(ctx, ev.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created, err := events.Create(ctx, r.event(w, "", 0, time.Time{}), metav1.CreateOptions{})
		return created, wrap(err, ev)
	}
	if err != nil {
		return nil, wrap(err, ev)
	}
	ev = r.event(w, cur.Message, cur.Count, cur.FirstTimestamp.Time)
	ev.ResourceVersion = cur.ResourceVersion
	patched, err := r.patch(ctx, ev)
	return patched, wrap(err, ev)
}

// trailPatch is what a step changes in an Event, as a merge patch: the
// resourceVersion in it makes the API server refuse it (a conflict) where
// the Event changed since it was read, as an update would, without the
// update verb the operator holds nowhere else.
type trailPatch struct {
	Metadata       trailPatchMeta          `json:"metadata"`
	Message        string                  `json:"message"`
	Count          int32                   `json:"count"`
	FirstTimestamp metav1.Time             `json:"firstTimestamp"`
	LastTimestamp  metav1.Time             `json:"lastTimestamp"`
	Action         string                  `json:"action"`
	Related        *corev1.ObjectReference `json:"related"`
}

type trailPatchMeta struct {
	ResourceVersion string `json:"resourceVersion"`
}

// patch writes ev's trail over the Event at ev's resourceVersion.
func (r *Recorder) patch(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	body, err := json.Marshal(trailPatch{
		Metadata: trailPatchMeta{ResourceVersion: ev.ResourceVersion},
		Message:  ev.Message, Count: ev.Count, FirstTimestamp: ev.FirstTimestamp, LastTimestamp: ev.LastTimestamp,
		Action: ev.Action, Related: ev.Related,
	})
	if err != nil {
		return nil, err
	}
	return r.client.Events(ev.Namespace).Patch(ctx, ev.Name, types.MergePatchType, body, metav1.PatchOptions{})
}

// event is the Event of w's pending steps on top of a trail with this
// message, count and first time (none for a new Event).
func (r *Recorder) event(w *writing, base string, count int32, first time.Time) *corev1.Event {
	if first.IsZero() && len(w.pending) > 0 {
		first = w.pending[0].at
	}
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: w.name, Namespace: w.namespace},
		InvolvedObject:      w.ref,
		Related:             w.related,
		Reason:              w.key.reason,
		Type:                w.key.typ,
		Action:              w.action,
		Message:             trail(w.pending, base),
		Count:               count + w.unwritten,
		FirstTimestamp:      metav1.NewTime(first),
		LastTimestamp:       metav1.NewTime(w.lastSeen),
		Source:              corev1.EventSource{Component: r.opts.Controller},
		ReportingController: r.opts.Controller,
		ReportingInstance:   r.opts.Instance,
	}
}

func wrap(err error, ev *corev1.Event) error {
	if err != nil {
		return fmt.Errorf("writing event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	return nil
}
