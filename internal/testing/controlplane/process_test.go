//go:build linux

package controlplane

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startShell(t *testing.T, script string) *Process {
	t.Helper()
	p, err := StartProcess("sh", "/bin/sh", []string{"-c", script}, nil, filepath.Join(t.TempDir(), "sh.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

func exited(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not exit")
	}
}

func TestProcessUnexpected(t *testing.T) {
	t.Run("stopped on purpose", func(t *testing.T) {
		p := startShell(t, "sleep 30")
		require.NoError(t, p.Stop())
		assert.NoError(t, p.Unexpected())
	})
	t.Run("killed on purpose", func(t *testing.T) {
		p := startShell(t, "sleep 30")
		p.Kill()
		assert.NoError(t, p.Unexpected())
	})
	t.Run("exits zero", func(t *testing.T) {
		p := startShell(t, "exit 0")
		exited(t, p)
		assert.NoError(t, p.Unexpected())
	})
	t.Run("exits non-zero unasked", func(t *testing.T) {
		p := startShell(t, "exit 1")
		exited(t, p)
		assert.Error(t, p.Unexpected())
		require.NoError(t, p.Stop())
		assert.Error(t, p.Unexpected(), "a Stop after the exit does not excuse it")
	})
	t.Run("race status after a stop", func(t *testing.T) {
		p := startShell(t, "trap 'exit 66' TERM; while :; do sleep 0.1; done")
		time.Sleep(200 * time.Millisecond) // let the shell set its trap
		require.NoError(t, p.Stop())
		assert.ErrorContains(t, p.Unexpected(), "race detector")
	})
	t.Run("exit expected", func(t *testing.T) {
		p := startShell(t, "sleep 0.2; exit 1")
		p.ExpectExit()
		exited(t, p)
		assert.NoError(t, p.Unexpected())
	})
	t.Run("port taken", func(t *testing.T) {
		p := startShell(t, "echo 'listen tcp 127.0.0.1:8080: bind: address already in use'; exit 1")
		exited(t, p)
		assert.True(t, p.LoggedAddressInUse(), "the caller can retry on another port")
		assert.Error(t, p.Unexpected())
	})
	t.Run("race report in the log", func(t *testing.T) {
		p := startShell(t, "echo 'WARNING: DATA RACE'; sleep 30")
		require.Eventually(t, func() bool { return p.Unexpected() != nil }, 10*time.Second, 50*time.Millisecond, "judged while running")
		p.Kill()
		assert.ErrorContains(t, p.Unexpected(), "data race")
	})
}

// The stats are the process's own: a busy loop's CPU time grows, an idle
// one's does not, and its resident set is below its peak.
func TestProcessStats(t *testing.T) {
	busy := startShell(t, "while :; do :; done")
	idle := startShell(t, "sleep 30")
	time.Sleep(time.Second)
	cpuBusy, err := busy.CPUSeconds()
	require.NoError(t, err)
	cpuIdle, err := idle.CPUSeconds()
	require.NoError(t, err)
	assert.Greater(t, cpuBusy, 0.05, "a second of a busy loop, however loaded the machine")
	assert.Less(t, cpuIdle, 0.05, "sleep uses no CPU")
	rss, err := idle.RSSMiB()
	require.NoError(t, err)
	peak, err := idle.PeakRSSMiB()
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.LessOrEqual(t, rss, peak)
	require.NoError(t, busy.Stop())
	_, err = busy.CPUSeconds()
	assert.Error(t, err, "an exited process has no stats")
}
