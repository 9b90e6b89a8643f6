package simcluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A check's errors do not end the wait; at the timeout, the error says
// where things stood and why.
func TestPollReportsTheLastStateAtTheTimeout(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), 30*time.Millisecond, time.Millisecond, func() (bool, string, error) {
		calls++
		return false, "3 of 4 nodes ready", errors.New("connection refused")
	})
	if err == nil || !strings.Contains(err.Error(), "3 of 4 nodes ready: connection refused") || calls < 2 {
		t.Errorf("error = %v after %d calls, want the last state and error after several", err, calls)
	}
	calls = 0
	err = Poll(context.Background(), time.Minute, time.Millisecond, func() (bool, string, error) {
		calls++
		return calls == 3, "", nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d calls, want success at the third", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Minute, time.Minute, func() (bool, string, error) { return false, "", nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll on a cancelled context = %v", err)
	}
}

func TestParallelCallsEveryItemAndReturnsAnError(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	err := Parallel([]int{1, 2, 3, 4, 5}, 2, func(i int) error {
		mu.Lock()
		seen = append(seen, i)
		mu.Unlock()
		if i == 4 {
			return errors.New("four")
		}
		return nil
	})
	slices.Sort(seen)
	if err == nil || err.Error() != "four" || !slices.Equal(seen, []int{1, 2, 3, 4, 5}) {
		t.Errorf("Parallel = %v, called with %v", err, seen)
	}
}
