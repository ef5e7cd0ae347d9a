package kit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestEvery(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	t.Run("zero never calls and returns at once", func(t *testing.T) {
		Every(context.Background(), clk, 0, func() { t.Fatal("called") })
	})
	t.Run("calls on every tick until the context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var calls atomic.Int32
		done := make(chan struct{})
		go func() { Every(ctx, clk, time.Minute, func() { calls.Add(1) }); close(done) }()
		require.Eventually(t, func() bool {
			clk.Step(time.Minute)
			return calls.Load() >= 2
		}, 5*time.Second, time.Millisecond)
		cancel()
		<-done
		n := calls.Load()
		clk.Step(time.Minute)
		assert.Equal(t, n, calls.Load(), "no call after the context ended")
	})
}
