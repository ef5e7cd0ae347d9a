package kittest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Parallel runs f for 0..n-1 on 16 goroutines, as a benchmark creates its
// fleet, and fails tb on any error once all have run.
func Parallel(tb testing.TB, n int, f func(int) error) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err)
	}
}

// WaitFor polls cond every interval until it holds, failing tb with what
// after timeout.
func WaitFor(tb testing.TB, every, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	require.NoError(tb, wait.PollUntilContextTimeout(context.Background(), every, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil }), what)
}
