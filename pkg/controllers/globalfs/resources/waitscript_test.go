package resources_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
)

// The wait target is read from the connection string by HCC, so the init
// container gets a host and a port and never the password.
func TestPostgresWaitTarget(t *testing.T) {
	cases := map[string]string{
		"postgres://gfs:secret@db.example:6543/gfs?sslmode=require": "db.example 6543",
		"postgresql://db/gfs":                     "db 5432",
		"postgres://u@[::1]:5433/x":               "::1 5433",
		"postgres://u@[fd00::5]/x":                "fd00::5 5432",
		"postgres://-e/bin/sh:5432/x":             "", // option-like: not waited for
		"postgres://h1:5432,h2:5432/x":            "", // several hosts: left to gfsc
		"postgres://db.example:54x2/x":            "",
		"postgres://db.example:0/x":               "",
		"postgres://db.example:99999/x":           "",
		"host=db.example port=5432 dbname=gfs":    "", // not a URL
		"mysql://db.example:3306/x":               "",
		"postgres:opaque":                         "",
		"postgres://u:p%40ss@db.example:5432/gfs": "db.example 5432",
		"": "",
	}
	for url, want := range cases {
		t.Run(url, func(t *testing.T) {
			host, port := resources.PostgresWaitTarget(url)
			assert.Equal(t, want, strings.TrimSpace(host+" "+port))
		})
	}
}

// The init container's script, run by this machine's POSIX shell with nc
// replaced by a stub that records what it was asked to reach: the host and
// port it waits for, or that it does not wait at all.
func TestTheWaitForPostgresScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell on this machine")
	}
	cases := map[[2]string]string{
		{"db.example", "6543"}: "-z -w 2 db.example 6543",
		{"::1", "5433"}:        "-z -w 2 ::1 5433",
		{"", ""}:               "", // no target: not waited for
		{"", "5432"}:           "",
		{"-e", "5432"}:         "", // option-like, should HCC ever pass one
		{"db;reboot", "5432"}:  "",
		{"db.example", "54x2"}: "",
		{"db.example", ""}:     "",
	}
	for target, want := range cases {
		t.Run(target[0]+":"+target[1], func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "nc.args")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "nc"), []byte("#!/bin/sh\necho \"$@\" >> "+record+"\n"), 0o755))
			cmd := exec.Command(sh, "-c", resources.WaitForPostgresSh)
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", resources.EnvPostgresHost + "=" + target[0], resources.EnvPostgresPort + "=" + target[1]}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			got, _ := os.ReadFile(record)
			assert.Equal(t, want, strings.TrimSpace(string(got)))
		})
	}
}

// No container but gfsc and the seed sees the connection string.
func TestTheInitContainerNeverSeesTheConnectionString(t *testing.T) {
	opts := resourcestest.Options
	opts.WaitHost, opts.WaitPort = "db.example", "5432"
	for _, pod := range [][]string{
		envNames(resources.BuildDeployment(resourcestest.NewGFS("g"), opts, "").Spec.Template.Spec.InitContainers[0].Env),
		envNames(resources.BuildSeedJob(resourcestest.NewGFS("g"), opts, "").Spec.Template.Spec.InitContainers[0].Env),
	} {
		assert.Equal(t, []string{resources.EnvPostgresHost, resources.EnvPostgresPort}, pod)
	}
	init := resources.BuildDeployment(resourcestest.NewGFS("g"), opts, "").Spec.Template.Spec.InitContainers[0]
	assert.Equal(t, "db.example", init.Env[0].Value)
	for _, e := range init.Env {
		assert.Nil(t, e.ValueFrom, "no Secret reference in the init container")
	}
}

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}
