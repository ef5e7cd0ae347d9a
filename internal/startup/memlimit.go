package startup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
)

// The files a container's memory limit is read from: cgroup v2's, then
// cgroup v1's. In a container either is the container's own cgroup
// (Kubernetes gives each container its own).
const (
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// memoryLimitShare is the share of the container's memory limit the Go
// runtime is asked to stay under when GOMEMLIMIT is unset: the rest is
// for what the runtime does not count (the binary's mapped text, the
// kernel's page cache charged to the container) and its overshoot
// between two collections. docs/deploy.md, "Memory".
const memoryLimitShare = 0.9

// cgroupV1Unlimited is the smallest value cgroup v1 reports for no limit:
// math.MaxInt64 rounded down to a page (9223372036854771712 with 4 KiB
// pages); no machine has that much memory.
const cgroupV1Unlimited = math.MaxInt64 / 2

// MemoryLimit is the soft memory limit a process runs with and where it
// came from.
type MemoryLimit struct {
	// Bytes is the limit; math.MaxInt64 is none.
	Bytes int64
	// Container is the container's memory limit it was derived from, 0
	// when it was not.
	Container int64
	// Source says where it came from: "GOMEMLIMIT", "cgroup v2", "cgroup
	// v1", or "none" (no GOMEMLIMIT and no container limit found).
	Source string
}

// memorySources are what DeriveMemoryLimit reads, a seam for tests.
type memorySources struct {
	getenv   func(string) string
	readFile func(string) ([]byte, error)
}

// deriveMemoryLimit decides the soft memory limit. GOMEMLIMIT, when set,
// is the Go runtime's own and wins (the runtime applied it before main;
// current is what it set). Otherwise it is memoryLimitShare of the
// container's limit, from cgroup v2's memory.max ("max": none), else
// cgroup v1's memory.limit_in_bytes. A limit file that exists but does
// not hold a limit is an error: the process then runs without one, and
// says so.
func deriveMemoryLimit(src memorySources, current int64) (MemoryLimit, error) {
	if src.getenv("GOMEMLIMIT") != "" {
		return MemoryLimit{Bytes: current, Source: "GOMEMLIMIT"}, nil
	}
	for _, f := range []struct{ path, source string }{{cgroupV2MemoryMax, "cgroup v2"}, {cgroupV1MemoryMax, "cgroup v1"}} {
		raw, err := src.readFile(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		none := MemoryLimit{Bytes: math.MaxInt64, Source: "none"}
		if err != nil {
			return none, fmt.Errorf("reading the container's memory limit: %w", err)
		}
		value := strings.TrimSpace(string(raw))
		if value == "max" {
			return none, nil
		}
		limit, err := strconv.ParseInt(value, 10, 64)
		if err != nil || limit <= 0 {
			return none, fmt.Errorf("%s holds %q, not a memory limit", f.path, value)
		}
		if limit >= cgroupV1Unlimited {
			return none, nil
		}
		return MemoryLimit{Bytes: int64(float64(limit) * memoryLimitShare), Container: limit, Source: f.source}, nil
	}
	return MemoryLimit{Bytes: math.MaxInt64, Source: "none"}, nil
}

// SetMemoryLimit gives the Go runtime a soft memory limit under the
// container's when GOMEMLIMIT is unset (deriveMemoryLimit), so the
// collector works harder as the process nears the container's limit
// instead of being killed at it, and logs the limit the process runs
// with. It is no way to make a process fit a container too small for
// its live heap: the runtime then collects continuously, up to half the
// CPU, and the container is killed all the same.
func SetMemoryLimit(log zerolog.Logger) MemoryLimit {
	return setMemoryLimit(log, memorySources{getenv: os.Getenv, readFile: os.ReadFile}, debug.SetMemoryLimit)
}

func setMemoryLimit(log zerolog.Logger, src memorySources, set func(int64) int64) MemoryLimit {
	limit, err := deriveMemoryLimit(src, set(-1)) // -1 reads the limit without changing it
	if err != nil {
		log.Warn().Err(err).Msg("no soft memory limit: the container's limit could not be read")
	}
	if limit.Container > 0 {
		set(limit.Bytes)
	}
	event := log.Info().Str("source", limit.Source)
	if limit.Bytes == math.MaxInt64 {
		event.Str("memoryLimit", "none")
	} else {
		event.Int64("memoryLimitBytes", limit.Bytes)
	}
	if limit.Container > 0 {
		event.Int64("containerLimitBytes", limit.Container)
	}
	event.Msg("soft memory limit")
	return limit
}
