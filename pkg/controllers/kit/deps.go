package kit

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/config"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/health"
)

// Deps is what every reconciler is built from. cmd/hcc-controller fills it
// once per leadership; tests fill it with fake clientsets and a fake clock.
type Deps struct {
	Kube      kubernetes.Interface
	HCC       clientset.Interface
	Informers *Informers
	Recorder  record.EventRecorder
	Registry  prometheus.Registerer
	Queues    *Queues
	Clock     clock.WithTicker
	Log       zerolog.Logger
	Config    *config.Config
	Readiness *health.Readiness
	// Hold, when set, keeps a group of writes together across a leader's
	// shutdown (leaderfence.Fence.Hold); nil holds nothing.
	Hold WriteHold
}

// WriteHold admits a group of writes as one: it returns the context to make
// them with and a func to call once they are done, or an error when none
// may be made. The writes of the group are not cancelled with ctx.
type WriteHold func(ctx context.Context) (context.Context, func(), error)

// Reconciler is one of the controllers hcc-controller runs.
type Reconciler interface {
	// Name names it in logs.
	Name() string
	// Run reconciles until ctx is done and returns once every goroutine it
	// started has returned. The informers it asked for are started before
	// Run is called; Run waits for their caches itself.
	Run(ctx context.Context) error
}
