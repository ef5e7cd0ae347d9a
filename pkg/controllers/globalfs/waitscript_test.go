package globalfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The init container's script, run by this machine's POSIX shell with nc
// replaced by a stub that records what it was asked to reach: the host and
// port it waits for, or that it does not wait at all.
func TestTheWaitForPostgresScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell on this machine")
	}
	cases := map[string]string{
		"postgres://gfs:secret@db.example:6543/gfs?sslmode=require": "-z -w 2 db.example 6543",
		"postgresql://db/gfs":                     "-z -w 2 db 5432",
		"postgres://u@[::1]:5433/x":               "-z -w 2 ::1 5433",
		"postgres://u@[fd00::5]/x":                "-z -w 2 fd00::5 5432",
		"postgres://-e/bin/sh:5432/x":             "", // option-like: not waited for
		"postgres://h1:5432,h2:5432/x":            "", // several hosts: left to gfsc
		"postgres://db.example:54x2/x":            "",
		"host=db.example port=5432 dbname=gfs":    "", // not a URL
		"postgres://u:p%40ss@db.example:5432/gfs": "-z -w 2 db.example 5432",
	}
	for url, want := range cases {
		t.Run(url, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "nc.args")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "nc"), []byte("#!/bin/sh\necho \"$@\" >> "+record+"\n"), 0o755))
			cmd := exec.Command(sh, "-c", waitForPostgresSh)
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", EnvDatabaseURL + "=" + url}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.NotContains(t, string(out), "secret", "the connection string is never printed")
			got, _ := os.ReadFile(record)
			assert.Equal(t, want, strings.TrimSpace(string(got)))
		})
	}
}
