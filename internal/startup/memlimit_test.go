package startup

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func files(env map[string]string, contents map[string]string) memorySources {
	return memorySources{
		getenv: func(k string) string { return env[k] },
		readFile: func(path string) ([]byte, error) {
			if c, ok := contents[path]; ok {
				return []byte(c), nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

func TestDeriveMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  MemoryLimit
		fails bool
	}{
		{name: "cgroup v2: nine tenths of memory.max",
			files: map[string]string{cgroupV2MemoryMax: "1073741824\n"},
			want:  MemoryLimit{Bytes: 966367641, Container: 1024 * mib, Source: "cgroup v2"}},
		{name: "cgroup v2 without a limit",
			files: map[string]string{cgroupV2MemoryMax: "max\n", cgroupV1MemoryMax: "1073741824\n"},
			want:  MemoryLimit{Bytes: math.MaxInt64, Source: "none"}},
		{name: "cgroup v1",
			files: map[string]string{cgroupV1MemoryMax: "2147483648\n"},
			want:  MemoryLimit{Bytes: 1932735283, Container: 2048 * mib, Source: "cgroup v1"}},
		{name: "cgroup v1 without a limit (the largest int64, page-rounded)",
			files: map[string]string{cgroupV1MemoryMax: "9223372036854771712\n"},
			want:  MemoryLimit{Bytes: math.MaxInt64, Source: "none"}},
		{name: "no cgroup files: no limit",
			want: MemoryLimit{Bytes: math.MaxInt64, Source: "none"}},
		{name: "GOMEMLIMIT wins over the container's limit",
			env:   map[string]string{"GOMEMLIMIT": "600MiB"},
			files: map[string]string{cgroupV2MemoryMax: "1073741824"},
			want:  MemoryLimit{Bytes: 600 * mib, Source: "GOMEMLIMIT"}},
		{name: "a limit file that holds no limit",
			files: map[string]string{cgroupV2MemoryMax: "lots"},
			want:  MemoryLimit{Bytes: math.MaxInt64, Source: "none"}, fails: true},
		{name: "a zero limit",
			files: map[string]string{cgroupV2MemoryMax: "0"},
			want:  MemoryLimit{Bytes: math.MaxInt64, Source: "none"}, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deriveMemoryLimit(files(tc.env, tc.files), 600*mib)
			if tc.fails {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDeriveMemoryLimitReportsAnUnreadableFile(t *testing.T) {
	src := memorySources{getenv: func(string) string { return "" },
		readFile: func(string) ([]byte, error) { return nil, errors.New("permission denied") }}
	got, err := deriveMemoryLimit(src, math.MaxInt64)
	require.ErrorContains(t, err, "permission denied")
	assert.Equal(t, "none", got.Source)
}

// The limit derived from the container's is given to the runtime and
// logged; GOMEMLIMIT's, or none, is only logged.
func TestSetMemoryLimitSetsAndLogs(t *testing.T) {
	var set []int64
	setter := func(limit int64) int64 {
		if limit >= 0 {
			set = append(set, limit)
		}
		return math.MaxInt64
	}
	var out bytes.Buffer
	got := setMemoryLimit(zerolog.New(&out), files(nil, map[string]string{cgroupV2MemoryMax: "1000"}), setter)
	assert.Equal(t, int64(900), got.Bytes)
	assert.Equal(t, []int64{900}, set)
	assert.Contains(t, out.String(), `"source":"cgroup v2","memoryLimitBytes":900,"containerLimitBytes":1000,"message":"soft memory limit"`)

	set, out = nil, bytes.Buffer{}
	setMemoryLimit(zerolog.New(&out), files(nil, nil), setter)
	assert.Empty(t, set, "no container limit: the runtime's is left alone")
	assert.Contains(t, out.String(), `"source":"none","memoryLimit":"none"`)

	set, out = nil, bytes.Buffer{}
	setMemoryLimit(zerolog.New(&out), files(nil, map[string]string{cgroupV2MemoryMax: "x"}), setter)
	assert.Empty(t, set)
	assert.Contains(t, out.String(), `"level":"warn"`)
}
