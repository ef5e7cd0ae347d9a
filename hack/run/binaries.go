package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// buildBinaries builds bin/hcc-controller and bin/hcc-api as make build
// does (CGO off, trimmed paths), without its version stamp.
func buildBinaries(ctx context.Context, root string) error {
	progress("building bin/hcc-controller and bin/hcc-api")
	for _, name := range []string{"hcc-controller", "hcc-api"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(root, "bin", name), "./cmd/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	}
	return nil
}

// endpoints are where the started binaries serve.
type endpoints struct {
	controller, api string // http://127.0.0.1:PORT
	desktopToken    string // CONTEXT_MAPPER_DESKTOP_API_TOKEN of hcc-api
}

// startBinaries runs hcc-controller and hcc-api with the shipped
// Deployments' configuration and the local endpoints, and returns where
// they serve once both answer /health. On the local cluster the Host pods'
// MCP_HOST_GATEWAY_URL is the development Control API and workspaces use
// its StorageClass; on a cluster of HCC_KUBECONFIG (local false) both keep
// the shipped values, which that cluster's pods can reach.
func (r *runner) startBinaries(ctx context.Context, local bool, controlAPIURL, controllerKubeconfig, apiKubeconfig string) (endpoints, error) {
	var ep endpoints
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		return ep, err
	}
	base := filepath.Join(r.root, "deploy", "base")
	controllerEnv, err := controlplane.ShippedEnv(filepath.Join(base, "controller", "deployment.yaml"))
	if err != nil {
		return ep, err
	}
	controllerEnv = append(controllerEnv,
		// A leader-election identity of its own: two make runs against one
		// cluster (HCC_KUBECONFIG) must not both believe they hold the
		// Lease.
		fmt.Sprintf("POD_NAME=make-run-%d", os.Getpid()),
		"HCC_CONTROLLER_PORT="+strconv.Itoa(ports[0]),
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET="+string(r.controlAPI.HMACSecret()),
		"CONTROL_API_BASE_URL="+controlAPIURL,
	)
	if local {
		controllerEnv = append(controllerEnv,
			"MCP_HOST_GATEWAY_URL="+controlAPIURL,
			// The local cluster's default class (the minikube overlay's value).
			"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS="+controlplane.StorageClass,
		)
	}
	apiEnv, err := controlplane.ShippedEnv(filepath.Join(base, "api", "deployment.yaml"))
	if err != nil {
		return ep, err
	}
	ep.desktopToken = randomHex()
	apiEnv = append(apiEnv,
		"CONTEXT_MAPPER_PORT="+strconv.Itoa(ports[1]),
		"HCC_MCP_HOST_JWT_PUBLIC_KEY="+r.controlAPI.PublicKeyPEM(),
		"CONTEXT_MAPPER_DESKTOP_API_TOKEN="+ep.desktopToken,
	)
	for _, b := range []struct {
		name, kubeconfig string
		env              []string
		port             int
	}{
		{"hcc-controller", controllerKubeconfig, controllerEnv, ports[0]},
		{"hcc-api", apiKubeconfig, apiEnv, ports[1]},
	} {
		log := filepath.Join(r.dir, b.name+".log")
		p, err := controlplane.StartProcess(b.name, filepath.Join(r.root, "bin", b.name),
			[]string{"--kubeconfig", b.kubeconfig}, append(controlplane.BinaryEnv(), b.env...), log)
		if err != nil {
			return ep, err
		}
		r.processes = append(r.processes, p)
		if err := waitHealthy(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/health", b.port)); err != nil {
			return ep, fmt.Errorf("%s: %w; the end of %s:\n%s", b.name, err, log, p.LogTail(20))
		}
		progress("%s is up (log: %s)", b.name, log)
	}
	ep.controller = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	ep.api = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	return ep, nil
}

func randomHex() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// waitHealthy polls url until it answers 200, the process exits or a
// minute passes.
func waitHealthy(ctx context.Context, p *controlplane.Process, url string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done():
			return fmt.Errorf("exited: %v", p.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return errors.New("no healthy answer within a minute")
}
