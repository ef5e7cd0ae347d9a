package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clerum/hcc/pkg/config"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
)

func TestAReplicaWithoutAnElectionIsNotReadyBeforeItsOperatorsStart(t *testing.T) {
	alone := newReadiness(config.Core{LeaderElect: false})
	assert.False(t, alone.Ready(), "ready before the NetworkPolicy operator even registered its check")
	assert.Equal(t, []string{netpolcontroller.ReadinessCheck}, alone.Pending())

	assert.True(t, newReadiness(config.Core{LeaderElect: true}).Ready(), "a standby is ready")
	assert.True(t, newReadiness(config.Core{DevMode: true}).Ready(), "dev mode reconciles nothing")
}
