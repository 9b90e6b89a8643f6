package simcluster

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Poll calls check every interval until it reports done or timeout
// passes; the timeout error carries check's last description of where
// things stand, and its last error. An error from check does not end the
// wait: against a cluster whose API server may be restarting, a failed
// read is one more reason to look again.
func Poll(ctx context.Context, timeout, interval time.Duration, check func() (done bool, where string, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, where, err := check()
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("after %s: %s: %w", timeout, where, err)
			}
			return fmt.Errorf("after %s: %s", timeout, where)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Parallel calls fn for each item on workers goroutines and returns the
// first error, after every call has returned: one request per object is
// how a thousand-node cluster gets filled in seconds rather than minutes.
func Parallel[T any](items []T, workers int, fn func(T) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan T)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := fn(it); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	return first
}
