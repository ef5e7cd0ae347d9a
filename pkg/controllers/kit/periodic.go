package kit

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Every calls f every d on clk until ctx is done, and returns then; with d
// zero or less it returns at once. Reconcilers run their periodic full
// reconcile with it beside their loop.
func Every(ctx context.Context, clk clock.WithTicker, d time.Duration, f func()) {
	if d <= 0 {
		return
	}
	ticker := clk.NewTicker(d)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			f()
		}
	}
}
