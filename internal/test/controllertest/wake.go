package controllertest

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The simulator steps when something it reads changes, not on a clock: a
// step lists every DaemonSet, node, pod and ResourceSlice and gets the
// ConfigMaps nodes name, in any namespace, from the API server (its reads
// must be current, or it would create a DaemonSet's pod twice), and ten
// of them a second, while a test waited on a timer or an assertion, were
// work for every suite's API server (test/controllers/gating's used 30
// CPU s with them, 26 without) on a machine where go test's packages
// take turns on two cores.
const (
	// stepGap is the least time between two steps: a step's own writes
	// wake the next one, after it.
	stepGap = 100 * time.Millisecond
	// idleStep is the most: a change the simulator missed is seen.
	idleStep = time.Second
)

// watched are the kinds a step reads: a new read in a step needs its
// kind here, or the simulator sees its changes only once a second.
var watched = []client.Object{&appsv1.DaemonSet{}, &corev1.Node{}, &corev1.Pod{}, &corev1.ConfigMap{}, &resourcev1.ResourceSlice{}}

// wake asks for a step; one asked for while another is pending adds none.
func (s *Cluster) wake() {
	select {
	case s.woken <- struct{}{}:
	default:
	}
}

// watch wakes the simulator on every change of the kinds a step reads,
// until stop, which returns once the informers stopped (before the API
// server does, or they log their lost watches). The informers' caches
// only tell the simulator when to step; the step reads the API server.
func (s *Cluster) watch(ctx context.Context, cfg *rest.Config) (stop func(), err error) {
	informers, err := cache.New(cfg, cache.Options{Scheme: s.c.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("creating the simulator's informers: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := informers.Start(ctx); err != nil {
			fmt.Println("simulator: watching:", err)
		}
	}()
	stop = func() {
		cancel()
		<-stopped
	}
	wake := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.wake() },
		UpdateFunc: func(any, any) { s.wake() },
		DeleteFunc: func(any) { s.wake() },
	}
	for _, obj := range watched {
		informer, err := informers.GetInformer(ctx, obj)
		if err == nil {
			_, err = informer.AddEventHandler(wake)
		}
		if err != nil {
			stop()
			return nil, fmt.Errorf("watching %T for the simulator: %w", obj, err)
		}
	}
	return stop, nil
}

// run steps the simulation until ctx ends: once woken, at most once per
// stepGap, and at least once per idleStep.
func (s *Cluster) run(ctx context.Context) {
	for {
		if err := s.step(ctx); err != nil && ctx.Err() == nil {
			fmt.Println("simulator:", err)
			// Tried again after stepGap: an API server slow under load
			// changes nothing that would wake the simulator.
			s.wake()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(stepGap):
		}
		select {
		case <-ctx.Done():
			return
		case <-s.woken:
		case <-time.After(idleStep):
		}
	}
}
